package ordertest_test

import (
	"testing"

	"github.com/waitingroom/waitingroom/services/order-service/internal/order"
	"github.com/waitingroom/waitingroom/services/order-service/internal/order/ordertest"
)

// The fakes pass the contracts the real adapters pass (redisstore's in
// services/order-service/internal/wire, pg's in internal/pg), so a unit
// test over a fake sees what production would.

func TestTokensContract(t *testing.T) {
	ordertest.RunTokensContract(t, func(*testing.T) (order.Tokens, ordertest.Issuer) {
		m := ordertest.NewTokens()
		return m, m.Issuer()
	})
}

func newRepo(*testing.T) order.Repo { return ordertest.NewRepo() }

func TestOrdersContract(t *testing.T)  { ordertest.RunOrdersContract(t, newRepo) }
func TestCatalogContract(t *testing.T) { ordertest.RunCatalogContract(t, newRepo) }
func TestAnswersContract(t *testing.T) { ordertest.RunAnswersContract(t, newRepo) }
