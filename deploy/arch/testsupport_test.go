package arch

import (
	"slices"
	"strings"
	"testing"
)

// testSupport tells the workspace's test-support packages: the fakes of
// the domain's ports with their contract suites (ordertest, restoretest,
// dispatchtest, streamtest), authtest and testenv. They import package
// testing, and some of them the real servers' clients; only tests may
// import them.
func testSupport(path string) bool {
	return strings.HasSuffix(path, "test") || path == mod+"pkg/testenv"
}

// TestTestSupportOnlyInTests fails when a package's non-test files import
// a test-support package (a binary would then link package testing and
// the fakes). Test-support packages may import each other.
func TestTestSupportOnlyInTests(t *testing.T) {
	var support []string
	for _, p := range goList(t, mod+"...") {
		if testSupport(p.ImportPath) {
			support = append(support, strings.TrimPrefix(p.ImportPath, mod))
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, mod) && testSupport(imp) {
				t.Errorf("%s imports the test-support package %s outside its tests", strings.TrimPrefix(p.ImportPath, mod), strings.TrimPrefix(imp, mod))
			}
		}
	}
	// The rule must see the packages it is about.
	for _, want := range []string{
		"services/order-service/internal/order/ordertest",
		"services/admission-dispatcher/internal/restore/restoretest",
		"services/admission-dispatcher/internal/dispatch/dispatchtest",
		"services/notification-service/internal/stream/streamtest",
		"pkg/testenv",
	} {
		if !slices.Contains(support, want) {
			t.Errorf("go list did not list the test-support package %s (found %v)", want, support)
		}
	}
}
