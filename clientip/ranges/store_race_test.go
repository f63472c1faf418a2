package ranges

import (
	"context"
	"math"
	"net/http"
	"net/netip"
	"sync"
	"testing"

	"github.com/sourceip/sourceip/clientip"
	"github.com/stretchr/testify/assert"
	must "github.com/stretchr/testify/require"
)

// TestRefresherStoreRace: a refresher replacing a store's range set while
// the static part is edited and requests resolve (run with -race). Every
// resolution must be the answer of one whole configuration — static part
// and range set as installed together — never of half a change.
func TestRefresherStoreRace(t *testing.T) {
	srv := newRangeServer(t, "/list")
	doc := srv.docs["/list"]
	const listA, listB = "198.51.100.0/24\n", "203.0.113.0/24\n"
	doc.serve(listA, `"a"`, "")
	src, err := NewSource(SourceConfig{Provider: ProviderCIDRList, Locations: []string{srv.URL + "/list"}})
	must.NoError(t, err)
	ingress, office := clientip.MustParsePrefixSet("10.0.0.0/8"), clientip.MustParsePrefixSet("192.0.2.0/24")
	store, err := clientip.NewStore(clientip.Config{TrustedProxies: ingress, Header: "X-Forwarded-For"}, clientip.StoreOptions{})
	must.NoError(t, err)
	r, err := NewRefresher(RefresherConfig{Source: src, Client: srv.Client(), Clock: newClock(t0).Now,
		MaxShrink: 1, MaxGrowth: math.Inf(1), OnUpdate: store.SetRangesFunc("cdn")})
	must.NoError(t, err)

	// The peer is in list A; the header names an office proxy, then a client.
	tr := clientip.Transport{Peer: netip.MustParseAddrPort("198.51.100.1:443")}
	h := http.Header{"X-Forwarded-For": {"6.6.6.6, 192.0.2.77"}}
	want := map[netip.Addr]string{
		netip.MustParseAddr("198.51.100.1"): "list B: the peer is the client",
		netip.MustParseAddr("192.0.2.77"):   "list A, office untrusted",
		netip.MustParseAddr("6.6.6.6"):      "list A, office trusted",
	}

	const rounds = 300
	var writers, readers sync.WaitGroup
	done := make(chan struct{})
	writers.Go(func() {
		for i := range rounds {
			if i%2 == 0 {
				doc.serve(listB, `"b"`, "")
			} else {
				doc.serve(listA, `"a"`, "")
			}
			assert.NoError(t, r.Refresh(context.Background()))
		}
	})
	writers.Go(func() {
		for i := range rounds {
			_, err := store.Update(func(c *clientip.Config) {
				c.TrustedProxies = ingress
				if i%2 == 0 {
					c.TrustedProxies = ingress.Union(office)
				}
			})
			assert.NoError(t, err)
		}
	})
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				res, err := store.Resolver().Resolve(tr, h)
				if _, ok := want[res.Client]; !ok || err != nil {
					assert.Fail(t, "a resolution under no whole configuration", "%v, %v", res, err)
					return
				}
				_, _, _ = store.Ranges(), store.Stats(), store.Config()
				_, _ = r.Status(), r.Current()
			}
		})
	}
	writers.Wait()
	close(done)
	readers.Wait()
	st := store.Stats()
	assert.Zero(t, st.Refused)
	assert.Equal(t, uint64(rounds), r.Status().Updates)
}
