package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/examples/telemetry-gateway/internal/device"
	"github.com/sourceip/sourceip/explain"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// adminGet fetches path on the admin server from the loopback address from.
func adminGet(t *testing.T, e *env, from, path string) (int, string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	resp, err := c.Get("http://" + e.g.AdminAddr() + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestExplainConnection: the admin server explains an open MQTT connection,
// named by client id or connection number, to the operators ExplainAllow
// admits, and to no one else.
func TestExplainConnection(t *testing.T) {
	e := start(t, func(c *Config) {
		c.AdminAddr = "127.0.0.1:0"
		c.ExplainAllow = clientip.MustParsePrefixSet("127.0.0.1/32")
	})
	dev, err := device.Connect(t.Context(), e.device("explained", 5, 2, "127.0.0.31:4031"))
	require.NoError(t, err)
	defer dev.Close()
	require.NoError(t, dev.Publish(t.Context(), "telemetry/explained", 1, device.Reading("explained", 1, 20)))

	code, body := adminGet(t, e, "127.0.0.1", "/debug/clientip/conn?client=explained")
	require.Equal(t, http.StatusOK, code, body)
	var rep explain.Report
	require.NoError(t, json.Unmarshal([]byte(body), &rep))
	assert.Equal(t, "connection", rep.Kind)
	assert.Equal(t, netip.MustParseAddr("127.0.0.31"), rep.Result.Client)
	assert.Equal(t, clientip.SourceProxyProtocol, rep.Result.Source)
	require.Len(t, rep.Steps, 2)
	assert.Equal(t, clientip.VerdictTrusted, rep.Steps[0].Verdict, "the load balancer")
	assert.Equal(t, lbAddr, rep.Steps[0].Address)
	require.NotNil(t, rep.Proxy)
	assert.Equal(t, uint8(2), rep.Proxy.Version)
	assert.Nil(t, rep.Recorded, "the trust did not change since the connection arrived")

	// The same connection by its number, as text for curl.
	var num uint64
	_, err = fmt.Sscanf(rep.Connection.ID, "conn %d client explained", &num)
	require.NoError(t, err, rep.Connection.ID)
	code, body = adminGet(t, e, "127.0.0.1", fmt.Sprintf("/debug/clientip/conn?conn=%d&format=text", num))
	require.Equal(t, http.StatusOK, code, body)
	assert.True(t, strings.HasPrefix(body, "sourceip explain: connection"), body)
	assert.Contains(t, body, "answer:  127.0.0.31 from proxy-protocol hop 1 via 127.0.0.200")

	code, body = adminGet(t, e, "127.0.0.1", "/debug/clientip/conn?client=nobody")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "no open MQTT connection")

	// Anyone else learns nothing, not even whether the connection exists.
	code, body = adminGet(t, e, "127.0.0.2", "/debug/clientip/conn?client=explained")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "404 page not found\n", body)
}

// TestExplainOffByDefault: without ExplainAllow nothing is mounted.
func TestExplainOffByDefault(t *testing.T) {
	e := start(t, func(c *Config) { c.AdminAddr = "127.0.0.1:0" })
	code, _ := adminGet(t, e, "127.0.0.1", "/debug/clientip/conn?client=x")
	assert.Equal(t, http.StatusNotFound, code)
}
