package dispatchtest_test

import (
	"testing"

	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/dispatch/dispatchtest"
)

// The fake passes the contract redisstore passes (in
// services/admission-dispatcher/internal/wire), so a unit test over it
// sees what production would: with its clock stopped (exact milliseconds)
// and running with the wall clock, as under a Dispatcher.
func TestStoreContract(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop bool
	}{{"StoppedClock", true}, {"RunningClock", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dispatchtest.RunStoreContract(t, func(*testing.T) (dispatch.Store, dispatchtest.Harness) {
				s := dispatchtest.NewStore()
				if tc.stop {
					s.StopClock()
				}
				return s, s.Harness()
			})
		})
	}
}

// The fake is a dispatch.Store.
var _ dispatch.Store = (*dispatchtest.Store)(nil)
