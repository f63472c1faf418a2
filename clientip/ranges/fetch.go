package ranges

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

const (
	userAgent = "sourceip-ranges/1 (+https://github.com/sourceip/sourceip)"
	// maxValidator bounds an ETag or Last-Modified value kept for the next
	// conditional request.
	maxValidator = 256
)

// fetched is the outcome of fetching one document.
type fetched struct {
	notModified        bool
	body               []byte
	etag, lastModified string
	// confirmed is when the document was known current: the time of the
	// fetch for a URL, the modification time for a file (so a file nobody
	// updates ages).
	confirmed time.Time
}

// fetch reads one document: an https (or allowed http) URL with a
// conditional GET, or a local file, read whole each time, whose content's
// SHA-256 serves as its validator.
func (r *Refresher) fetch(ctx context.Context, now time.Time, loc string, prev docState, have bool) (fetched, error) {
	if !isURL(loc) {
		return r.fetchFile(now, loc, prev, have)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	if err != nil {
		return fetched{}, err
	}
	req.Header.Set("User-Agent", userAgent)
	conditional := have && (prev.etag != "" || prev.lastModified != "")
	if conditional {
		if prev.etag != "" {
			req.Header.Set("If-None-Match", prev.etag)
		}
		if prev.lastModified != "" {
			req.Header.Set("If-Modified-Since", prev.lastModified)
		}
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fetched{}, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotModified:
		if !conditional {
			return fetched{}, fmt.Errorf("%w: 304 Not Modified to an unconditional request", ErrHTTPStatus)
		}
		return fetched{notModified: true, etag: prev.etag, lastModified: prev.lastModified, confirmed: now}, nil
	default:
		return fetched{}, fmt.Errorf("%w: %s", ErrHTTPStatus, resp.Status)
	}
	if resp.ContentLength > int64(r.maxBytes) {
		return fetched{}, fmt.Errorf("%w: Content-Length %d, the limit is %d", ErrTooLarge, resp.ContentLength, r.maxBytes)
	}
	body, err := readLimited(resp.Body, r.maxBytes)
	if err != nil {
		return fetched{}, err
	}
	// A body cut short by the deadline can read as complete (a chunked
	// response the server ended when the client gave up); never parse it.
	if err := ctx.Err(); err != nil {
		return fetched{}, err
	}
	return fetched{
		body:         body,
		etag:         validator(resp.Header.Get("ETag")),
		lastModified: validator(resp.Header.Get("Last-Modified")),
		confirmed:    now,
	}, nil
}

func (r *Refresher) fetchFile(now time.Time, path string, prev docState, have bool) (fetched, error) {
	// Opening a named pipe for reading blocks until a writer opens it,
	// beyond the reach of Timeout and with the refresher's lock held: look
	// before opening, and look again at what was opened.
	if fi, err := os.Stat(path); err != nil {
		return fetched{}, err
	} else if !fi.Mode().IsRegular() {
		return fetched{}, fmt.Errorf("%w: %s is not a regular file", ErrMalformed, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fetched{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fetched{}, err
	}
	if !fi.Mode().IsRegular() {
		return fetched{}, fmt.Errorf("%w: %s is not a regular file", ErrMalformed, path)
	}
	if fi.Size() > int64(r.maxBytes) {
		return fetched{}, fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, path, fi.Size(), r.maxBytes)
	}
	body, err := readLimited(f, r.maxBytes)
	if err != nil {
		return fetched{}, err
	}
	// The content is the validator: a file replaced by one of the same
	// size whose modification time reads the same (seconds kept by the
	// filesystem, or times preserved by cp -p, rsync -t or tar) is another
	// list all the same.
	sum := sha256.Sum256(body)
	tag := "file:sha256:" + hex.EncodeToString(sum[:])
	confirmed := earlier(fi.ModTime(), now)
	if have && prev.etag == tag {
		return fetched{notModified: true, etag: tag, confirmed: confirmed}, nil
	}
	return fetched{body: body, etag: tag, confirmed: confirmed}, nil
}

func readLimited(rd io.Reader, limit int) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(rd, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return b, nil
}

// validator returns v if it is fit to send back in a conditional request.
func validator(v string) string {
	if len(v) > maxValidator || strings.ContainsFunc(v, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		return ""
	}
	return v
}

// checkRedirect refuses a redirect from https to anything else, and more
// than five redirects.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("ranges: stopped after 5 redirects")
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: %s to %s", ErrRedirect, via[0].URL.Redacted(), req.URL.Redacted())
	}
	return nil
}
