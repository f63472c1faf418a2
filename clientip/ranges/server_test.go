package ranges

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// servedDoc is one document a rangeServer serves, like a provider does:
// with an ETag and a Last-Modified, answering conditional requests with 304.
type servedDoc struct {
	mu           sync.Mutex
	body         string
	etag         string
	lastModified string
	status       int           // if set, answer with it instead
	chunked      bool          // send without Content-Length
	stall        chan struct{} // if set, send part of the body and wait on it
	requests     int
	ifNoneMatch  []string
	ifModSince   []string
}

func (d *servedDoc) serve(body, etag, lastModified string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.body, d.etag, d.lastModified, d.status = body, etag, lastModified, 0
}

func (d *servedDoc) fail(status int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status = status
}

func (d *servedDoc) seen() (requests int, ifNoneMatch, ifModSince []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.requests, append([]string(nil), d.ifNoneMatch...), append([]string(nil), d.ifModSince...)
}

func (d *servedDoc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	d.requests++
	inm, ims := r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since")
	d.ifNoneMatch = append(d.ifNoneMatch, inm)
	d.ifModSince = append(d.ifModSince, ims)
	body, etag, lm, status, chunked, stall := d.body, d.etag, d.lastModified, d.status, d.chunked, d.stall
	d.mu.Unlock()
	if status != 0 {
		w.WriteHeader(status)
		w.Write([]byte("<html><body>error</body></html>"))
		return
	}
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	if lm != "" {
		w.Header().Set("Last-Modified", lm)
	}
	if etag != "" && inm == etag || etag == "" && lm != "" && ims == lm {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if !chunked && stall == nil {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(http.StatusOK)
	if stall != nil {
		w.Write([]byte(body[:len(body)/2]))
		w.(http.Flusher).Flush()
		select {
		case <-stall:
		case <-r.Context().Done():
		}
		return
	}
	w.Write([]byte(body))
}

// rangeServer is a local HTTPS server standing in for a provider.
type rangeServer struct {
	*httptest.Server
	docs map[string]*servedDoc
}

func newRangeServer(t *testing.T, paths ...string) *rangeServer {
	t.Helper()
	s := &rangeServer{docs: make(map[string]*servedDoc)}
	mux := http.NewServeMux()
	for _, p := range paths {
		d := new(servedDoc)
		s.docs[p] = d
		mux.Handle(p, d)
	}
	s.Server = httptest.NewTLSServer(mux)
	t.Cleanup(s.Close)
	return s
}

// fakeClock is the refreshers' injected clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
