//go:build !unix

package gateway

// freeSpace is not implemented here: New then leaves the check out with a
// warning.
func freeSpace(string) (uint64, error) { return 0, errNoStatfs }
