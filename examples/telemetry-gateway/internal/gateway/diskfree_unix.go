//go:build unix

package gateway

import "golang.org/x/sys/unix"

// freeSpace returns the bytes available to unprivileged users on the file
// system that holds path, as df's "Avail" column.
func freeSpace(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
