package e2e_test

import (
	"bufio"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sourceip/sourceip/internal/e2e"
)

// command sends one RESP command to addr and returns the first line of the
// answer.
func command(t *testing.T, addr string, args ...string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	msg := "*" + strconv.Itoa(len(args)) + "\r\n"
	for _, a := range args {
		msg += "$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n"
	}
	_, err = c.Write([]byte(msg))
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	return line
}

// TestRedisRestart: a server without persistence forgets across a crash; a
// persistent one (appendfsync always) keeps what it acknowledged.
func TestRedisRestart(t *testing.T) {
	for _, persist := range []bool{false, true} {
		r := e2e.StartRedis(t, e2e.RedisConfig{Persist: persist})
		assert.Equal(t, "+OK\r\n", command(t, r.Addr(), "SET", "k", "v"))
		r.Kill()
		r.Restart()
		want := "$-1\r\n" // nil: forgotten
		if persist {
			want = "$1\r\n"
		}
		assert.Equal(t, want, command(t, r.Addr(), "GET", "k"), "persist=%v", persist)
	}
}
