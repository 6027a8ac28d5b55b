package restoretest_test

import (
	"testing"

	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore"
	"github.com/waitingroom/waitingroom/services/admission-dispatcher/internal/restore/restoretest"
)

// The fake passes the contract redisstore passes (in
// services/admission-dispatcher/internal/wire), so a unit test over it
// sees what production would.
func TestStoreContract(t *testing.T) {
	restoretest.RunStoreContract(t, func(*testing.T) (restore.Store, restoretest.Seeder) {
		s := restoretest.NewStore()
		return s, s.Seeder()
	})
}
