//go:build !linux

package goroutine

// watchReset: not watched off Linux (no epoll); a waiting body's wait
// ends at its deadline or the close.
func watchReset(*headConn) (<-chan struct{}, func()) { return nil, func() {} }
