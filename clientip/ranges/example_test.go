package ranges_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/sourceip/sourceip/clientip"
	"github.com/sourceip/sourceip/clientip/ranges"
)

func ExampleParseCIDRList() {
	set, err := ranges.ParseCIDRList([]byte("# our edge\n192.0.2.0/24\n2001:db8::/32 # v6\n192.0.2.0/24\n"))
	fmt.Println(set, err)
	_, err = ranges.ParseCIDRList([]byte("192.0.2.1/24\n"))
	fmt.Println(err)
	// Output:
	// 192.0.2.0/24,2001:db8::/32 <nil>
	// ranges: invalid prefix: line 1: "192.0.2.1/24": host bits are set (did you mean 192.0.2.0/24?)
}

// The snapshots that ship with the package, and how old each is.
func ExampleSnapshots() {
	for _, s := range ranges.Snapshots() {
		fmt.Printf("%-29s %s %3d prefixes\n", s.Name, s.Date.Format(time.DateOnly), s.Set.Len())
	}
	// Output:
	// aws-cloudfront-origin-facing  2026-08-22  49 prefixes
	// azure-frontdoor-backend       2025-07-22 170 prefixes
	// cloudflare                    2025-07-25  22 prefixes
	// fastly                        2025-07-25  21 prefixes
	// google-cloud                  2025-07-25 782 prefixes
	// google-load-balancers         2026-12-03   4 prefixes
}

func ExampleCloudFront() {
	src := ranges.CloudFront()
	snap, _ := src.Snapshot()
	fmt.Println(src)
	fmt.Println(snap.Name, snap.Date.Format(time.RFC3339), snap.Set.Contains(netip.MustParseAddr("130.176.88.1")))
	// Output:
	// aws services=CLOUDFRONT_ORIGIN_FACING from https://ip-ranges.amazonaws.com/ip-ranges.json
	// aws-cloudfront-origin-facing 2026-08-22T15:17:05Z true
}

// A refresher of a list served by a local HTTPS server that stands in for
// the provider: it starts from nothing (a CIDR list has no snapshot),
// installs the first fetch, pushes it into a trust store through OnUpdate,
// and refuses a list that would trust everyone.
func ExampleNewRefresher() {
	list := "198.51.100.0/24\n203.0.113.0/24\n"
	provider := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(list))
	}))
	defer provider.Close()

	src, err := ranges.NewSource(ranges.SourceConfig{
		Provider:  ranges.ProviderCIDRList,
		Locations: []string{provider.URL + "/edge.txt"},
	})
	if err != nil {
		panic(err)
	}
	var trusted clientip.PrefixSet // stands in for a trust store
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r, err := ranges.NewRefresher(ranges.RefresherConfig{
		Source:   src,
		Client:   provider.Client(),
		Clock:    func() time.Time { return now },
		OnUpdate: func(s clientip.PrefixSet) error { trusted = s; return nil },
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Status().Provenance, r.Check(0) != nil)

	err = r.Refresh(context.Background())
	st := r.Status()
	fmt.Println(err, st.Provenance, st.Prefixes, trusted)

	list = "0.0.0.0/0\n"
	err = r.Refresh(context.Background())
	fmt.Println(errors.Is(err, ranges.ErrAllAddresses), r.Current())
	// Output:
	// none true
	// <nil> network 2 198.51.100.0/24,203.0.113.0/24
	// true 198.51.100.0/24,203.0.113.0/24
}

// What a refresher reports when its provider has been unreachable: it keeps
// serving the last good set, and only a check with a maximum age calls that
// stale.
func ExampleRefresher_Check() {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r, err := ranges.NewRefresher(ranges.RefresherConfig{
		Source: ranges.Fastly(),
		Clock:  func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	st := r.Status()
	fmt.Println(st.Provenance, st.Prefixes, st.Confirmed.Format(time.DateOnly))
	fmt.Println(r.Check(0))
	fmt.Println(errors.Is(r.Check(30*24*time.Hour), ranges.ErrStale))
	// Output:
	// snapshot 21 2025-07-25
	// <nil>
	// true
}
