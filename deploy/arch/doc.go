// Package arch holds the workspace's architecture tests: which packages
// may import what. It has no code of its own; see imports_test.go.
package arch
