//go:build !linux

package ingest

import (
	"errors"
	"net"
)

type poller struct{}

func newPoller(*Server) (*poller, error) { return nil, errors.New("epoll is Linux only") }
func (p *poller) add(*Client) error      { return errors.New("epoll is Linux only") }
func (p *poller) remove(*Client)         {}
func (p *poller) run()                   {}
func (p *poller) close()                 {}

func socketFD(net.Conn) int { return -1 }

func sendQueued(int) (int, error) { return 0, errors.New("SIOCOUTQ is Linux only") }
