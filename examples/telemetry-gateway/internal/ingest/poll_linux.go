//go:build linux

package ingest

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"unsafe"
)

// poller is the epoll set where idle connections wait without a goroutine.
// Each is registered one-shot: the first readiness takes it out, and it is
// armed again the next time it parks.
type poller struct {
	s      *Server
	fd     int
	mu     sync.Mutex
	parked map[int32]*Client
}

func newPoller(s *Server) (*poller, error) {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &poller{s: s, fd: fd, parked: make(map[int32]*Client)}, nil
}

const pollEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

// add parks c (its mu held).
func (p *poller) add(c *Client) error {
	fd := int32(c.fd)
	p.mu.Lock()
	p.parked[fd] = c
	p.mu.Unlock()
	ev := syscall.EpollEvent{Events: pollEvents, Fd: fd}
	op := syscall.EPOLL_CTL_ADD
	if c.registered {
		op = syscall.EPOLL_CTL_MOD
	}
	err := syscall.EpollCtl(p.fd, op, c.fd, &ev)
	switch {
	case errors.Is(err, syscall.EEXIST):
		err = syscall.EpollCtl(p.fd, syscall.EPOLL_CTL_MOD, c.fd, &ev)
	case errors.Is(err, syscall.ENOENT):
		err = syscall.EpollCtl(p.fd, syscall.EPOLL_CTL_ADD, c.fd, &ev)
	}
	if err != nil {
		p.mu.Lock()
		if p.parked[fd] == c {
			delete(p.parked, fd)
		}
		p.mu.Unlock()
		return err
	}
	c.registered = true
	p.s.stats.Parked.Add(1)
	return nil
}

// remove takes a parked c out (its mu held), before its connection closes.
func (p *poller) remove(c *Client) {
	fd := int32(c.fd)
	p.mu.Lock()
	if p.parked[fd] == c {
		delete(p.parked, fd)
		p.s.stats.Parked.Add(-1)
	}
	p.mu.Unlock()
	if c.registered {
		_ = syscall.EpollCtl(p.fd, syscall.EPOLL_CTL_DEL, c.fd, nil)
		c.registered = false
	}
}

// run resumes each connection that has something to read, until the server
// stops.
func (p *poller) run() {
	defer p.s.bg.Done()
	events := make([]syscall.EpollEvent, 128)
	for {
		select {
		case <-p.s.stop:
			return
		default:
		}
		n, err := syscall.EpollWait(p.fd, events, 200)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			p.s.log.Error("ingest: epoll_wait failed", "error", err)
			return
		}
		for _, ev := range events[:n] {
			p.mu.Lock()
			c := p.parked[ev.Fd]
			if c != nil {
				delete(p.parked, ev.Fd)
				p.s.stats.Parked.Add(-1)
			}
			p.mu.Unlock()
			if c != nil {
				c.resume()
			}
		}
	}
}

func (p *poller) close() { _ = syscall.Close(p.fd) }

// sendQueued returns how many bytes the socket fd holds that its peer has
// not acknowledged (SIOCOUTQ, tcp(7)).
func sendQueued(fd int) (int, error) {
	var n int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&n))); e != 0 {
		return 0, e
	}
	return int(n), nil
}

// socketFD returns the descriptor of the TCP socket under conn's layers,
// or -1.
func socketFD(conn net.Conn) int {
	for range 8 {
		if tcp, ok := conn.(*net.TCPConn); ok {
			rc, err := tcp.SyscallConn()
			if err != nil {
				return -1
			}
			fd := -1
			if rc.Control(func(s uintptr) { fd = int(s) }) != nil {
				return -1
			}
			return fd
		}
		u, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			return -1
		}
		conn = u.NetConn()
	}
	return -1
}
