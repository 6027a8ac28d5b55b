package pg_test

import (
	"testing"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order/ordertest"
)

// The order database passes the contracts of order.Orders, order.Catalog
// and order.Answers that ordertest's fake passes, each case on a database
// of its own.

func contractRepo(t *testing.T) order.Repo {
	db, _, _ := newDB(t)
	return db
}

func TestOrdersContract(t *testing.T)  { ordertest.RunOrdersContract(t, contractRepo) }
func TestCatalogContract(t *testing.T) { ordertest.RunCatalogContract(t, contractRepo) }
func TestAnswersContract(t *testing.T) { ordertest.RunAnswersContract(t, contractRepo) }
