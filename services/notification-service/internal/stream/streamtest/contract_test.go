package streamtest_test

import (
	"testing"

	"github.com/waitingroom/waitingroom/services/notification-service/internal/stream/streamtest"
)

// The fake passes the contract redisstore passes (in
// services/notification-service/internal/wire), so a unit test over it
// sees what production would.
func TestPositionsContract(t *testing.T) {
	streamtest.RunPositionsContract(t, func(*testing.T) (streamtest.Positions, streamtest.Seeder) {
		s := streamtest.NewStore()
		return s, s.Seeder()
	})
}
