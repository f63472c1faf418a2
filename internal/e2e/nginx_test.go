package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStartNginx: the ports StartNginx returns answer when it returns, over
// TLS with a NewServerCert certificate too, and nginx is gone when the test
// that started it ends.
func TestStartNginx(t *testing.T) {
	cert := NewServerCert(t, "example.com", "127.0.0.1")
	var ports []int
	t.Run("run", func(t *testing.T) {
		ports = StartNginx(t, 2, func(p []int) string {
			return fmt.Sprintf(`	server {
		listen 127.0.0.1:%d;
		listen 127.0.0.1:%d ssl;
		ssl_certificate %s;
		ssl_certificate_key %s;
		location / { return 200 "$scheme"; }
	}`, p[0], p[1], cert.Cert, cert.Key)
		})
		require.Len(t, ports, 2)
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}}}
		for i, scheme := range []string{"http", "https"} {
			resp, err := client.Get(fmt.Sprintf("%s://127.0.0.1:%d/", scheme, ports[i]))
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, scheme, string(body))
		}
	})
	for _, port := range ports {
		_, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		assert.Error(t, err, "nginx still listens on %d after its test ended", port)
	}
}
