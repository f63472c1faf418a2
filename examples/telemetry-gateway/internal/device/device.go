// Package device is a simulated telemetry device for the gateway's demo,
// tests and benchmarks: a real MQTT client (eclipse/paho.mqtt.golang for MQTT
// 3.1.1, eclipse/paho.golang for MQTT 5) over TLS that can dial from a chosen
// loopback address and, playing its own load balancer, send a PROXY header
// before TLS, or, playing a load balancer that terminated TLS, a PROXY
// header with TLVs (the SSL TLV) before plain MQTT.
package device

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"
	"github.com/sourceip/sourceip/proxyproto"
)

// Config configures one connection of a device.
type Config struct {
	// ID is the MQTT client id, which the gateway requires to match the
	// readings' device name.
	ID string
	// Version is 4 (MQTT 3.1.1) or 5.
	Version byte
	// Addr is where to connect: the gateway or a load balancer in front.
	Addr string
	// Local is the address to dial from; the invalid Addr lets the kernel
	// choose.
	Local netip.Addr
	// Proxy, when 1 or 2, makes the device write a PROXY header of that
	// version first, claiming Claim as the client (its own address when
	// Claim is zero): the device acts as the load balancer.
	Proxy uint8
	Claim netip.AddrPort
	// TLVs are the PROXY v2 header's TLVs (proxyproto.SSL.TLV for TLS
	// terminated at the load balancer).
	TLVs proxyproto.TLVs
	// TLS is the client configuration (RootCAs, ServerName, Certificates);
	// nil speaks plain MQTT, as a load balancer that terminated TLS does.
	TLS *tls.Config
	// Timeout bounds connecting and each acknowledgement; zero means 10s.
	Timeout time.Duration
	// OnDial, when set, is called with each new TCP connection (before
	// TLS), so callers can see the address the device connects from.
	OnDial func(net.Conn)
}

// ConnectError is a CONNECT the server refused, with its CONNACK code
// (MQTT 5 reason code or 3.1.1 return code).
type ConnectError struct {
	Code byte
	Err  error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("connect refused (0x%02x): %v", e.Code, e.Err)
}
func (e *ConnectError) Unwrap() error { return e.Err }

// PublishError is a PUBACK with a failure reason code (MQTT 5).
type PublishError struct {
	Code byte
	Err  error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("publish refused (0x%02x): %v", e.Code, e.Err)
}
func (e *PublishError) Unwrap() error { return e.Err }

// ErrNoAck means no acknowledgement arrived in time.
var ErrNoAck = errors.New("device: no acknowledgement")

// Dial opens the TCP connection (with the PROXY header, if configured) and
// completes the TLS handshake, if configured.
func Dial(ctx context.Context, cfg Config) (net.Conn, error) {
	d := &net.Dialer{Timeout: cfg.timeout()}
	if cfg.Local.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: cfg.Local.AsSlice()}
	}
	var (
		c   net.Conn
		err error
	)
	if cfg.Proxy != 0 {
		c, err = proxyproto.DialContext(ctx, d, "tcp", cfg.Addr, proxyproto.Header{
			Version: cfg.Proxy, Command: proxyproto.CommandProxy, Source: cfg.Claim, TLVs: cfg.TLVs,
		})
	} else {
		c, err = d.DialContext(ctx, "tcp", cfg.Addr)
	}
	if err != nil {
		return nil, err
	}
	if cfg.OnDial != nil {
		cfg.OnDial(c)
	}
	if cfg.TLS == nil {
		return c, nil
	}
	tc := tls.Client(c, cfg.TLS)
	hctx, cancel := context.WithTimeout(ctx, cfg.timeout())
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

func (cfg Config) timeout() time.Duration {
	if cfg.Timeout <= 0 {
		return 10 * time.Second
	}
	return cfg.Timeout
}

// Client is one connected device.
type Client struct {
	cfg     Config
	v3      pahov3.Client
	v5      *paho.Client
	lost    chan struct{}
	once    sync.Once
	lostCtx context.Context // cancelled with lost, to abort MQTT 5 publishes waiting for an ack
	loseCtx context.CancelFunc
}

// Connect dials and sends CONNECT (clean session); it returns a
// *ConnectError when the server refuses.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	c := &Client{cfg: cfg, lost: make(chan struct{})}
	c.lostCtx, c.loseCtx = context.WithCancel(context.Background())
	if cfg.Version == 5 {
		return c, c.connect5(ctx)
	}
	return c, c.connect3(ctx)
}

func (c *Client) markLost() { c.once.Do(func() { close(c.lost); c.loseCtx() }) }

func (c *Client) connect3(ctx context.Context) error {
	opts := pahov3.NewClientOptions().AddBroker("tls://" + c.cfg.Addr).
		SetClientID(c.cfg.ID).SetProtocolVersion(4).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectRetry(false).SetOrderMatters(false).
		SetConnectTimeout(c.cfg.timeout()).SetWriteTimeout(c.cfg.timeout()).SetKeepAlive(30 * time.Second).
		SetCustomOpenConnectionFn(func(*url.URL, pahov3.ClientOptions) (net.Conn, error) { return Dial(ctx, c.cfg) }).
		SetConnectionLostHandler(func(pahov3.Client, error) { c.markLost() })
	c.v3 = pahov3.NewClient(opts)
	tok := c.v3.Connect()
	if !tok.WaitTimeout(c.cfg.timeout()) {
		return ErrNoAck
	}
	if err := tok.Error(); err != nil {
		if ct, ok := tok.(*pahov3.ConnectToken); ok && ct.ReturnCode() != 0 {
			return &ConnectError{Code: ct.ReturnCode(), Err: err}
		}
		return err
	}
	return nil
}

func (c *Client) connect5(ctx context.Context) error {
	conn, err := Dial(ctx, c.cfg)
	if err != nil {
		return err
	}
	c.v5 = paho.NewClient(paho.ClientConfig{
		Conn:               packets.NewThreadSafeConn(conn),
		PacketTimeout:      c.cfg.timeout(),
		OnClientError:      func(error) { c.markLost() },
		OnServerDisconnect: func(*paho.Disconnect) { c.markLost() },
	})
	cctx, cancel := context.WithTimeout(ctx, c.cfg.timeout())
	defer cancel()
	ack, err := c.v5.Connect(cctx, &paho.Connect{ClientID: c.cfg.ID, CleanStart: true, KeepAlive: 30})
	if ack != nil && ack.ReasonCode >= 0x80 {
		return &ConnectError{Code: ack.ReasonCode, Err: fmt.Errorf("%s", ack.Properties.ReasonString)}
	}
	if err != nil {
		conn.Close()
		return err
	}
	go func() { <-c.v5.Done(); c.markLost() }()
	return nil
}

// Publish sends one message and, for QoS 1, waits for its PUBACK. An MQTT 5
// PUBACK with a failure code is a *PublishError; no acknowledgement within
// the timeout (or the connection lost first) is ErrNoAck.
func (c *Client) Publish(ctx context.Context, topic string, qos byte, payload []byte) error {
	if c.v5 != nil {
		pctx, cancel := context.WithTimeout(ctx, c.cfg.timeout())
		defer cancel()
		stop := context.AfterFunc(c.lostCtx, cancel) // paho.golang does not end waits when the connection drops
		defer stop()
		resp, err := c.v5.Publish(pctx, &paho.Publish{Topic: topic, QoS: qos, Payload: payload})
		if resp != nil && resp.ReasonCode >= 0x80 {
			return &PublishError{Code: resp.ReasonCode, Err: err}
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNoAck, err)
		}
		return nil
	}
	tok := c.v3.Publish(topic, qos, false, payload)
	select {
	case <-tok.Done():
		if err := tok.Error(); err != nil {
			return fmt.Errorf("%w: %v", ErrNoAck, err)
		}
		return nil
	case <-c.lost:
		return fmt.Errorf("%w: connection lost", ErrNoAck)
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrNoAck, ctx.Err())
	case <-time.After(c.cfg.timeout()):
		return ErrNoAck
	}
}

// Lost is closed when the connection ends without Close.
func (c *Client) Lost() <-chan struct{} { return c.lost }

// Close sends DISCONNECT and closes the connection.
func (c *Client) Close() {
	switch {
	case c.v5 != nil:
		_ = c.v5.Disconnect(&paho.Disconnect{ReasonCode: 0})
	case c.v3 != nil:
		c.v3.Disconnect(100)
	}
	c.markLost()
}

// Reading returns a reading's JSON payload for device and seq.
func Reading(device string, seq uint64, temp float64) []byte {
	return fmt.Appendf(nil, `{"device":%q,"seq":%d,"values":{"temp":%.1f}}`, device, seq, temp)
}
