package ranges

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sourceip/sourceip/clientip"
)

// The refresher's last-good copy on disk: JSON that records which source it
// belongs to, when the provider last confirmed it, per document the
// validators for conditional requests and the prefixes, and the baseline
// the MaxTotalGrowth guard measures from (absent in copies written before
// there was one; the copy's own set is then the baseline).
const (
	cacheVersion  = 1
	maxCacheBytes = 16 << 20
)

type cacheFile struct {
	Version   int        `json:"version"`
	Source    string     `json:"source"`
	Confirmed time.Time  `json:"confirmed"`
	Documents []cacheDoc `json:"documents"`
	Baseline  []string   `json:"baseline,omitempty"`
}

type cacheDoc struct {
	Location     string   `json:"location"`
	ETag         string   `json:"etag,omitempty"`
	LastModified string   `json:"lastModified,omitempty"`
	Prefixes     []string `json:"prefixes"`
}

// docState is what a refresher knows about one of its source's documents.
type docState struct {
	etag, lastModified string
	set                clientip.PrefixSet // the document's last accepted prefixes
}

// diskCopy is what readCache loads.
type diskCopy struct {
	docs      []docState
	set       clientip.PrefixSet // the union of the documents' sets
	baseline  clientip.PrefixSet // set when the copy records none
	confirmed time.Time
}

// readCache loads the disk copy of src's documents. A missing file is an
// error wrapping [fs.ErrNotExist]; anything else that keeps the copy from
// being used wraps [ErrCache]. The copy is held to the same rules as a fetched
// set ([CheckSet]), because whoever can write the file chooses whom we trust.
func readCache(path string, src *Source, allowPrivate bool) (diskCopy, error) {
	// A named pipe would block the open until a writer came (see fetchFile).
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return diskCopy{}, err
	case err != nil:
		return diskCopy{}, fmt.Errorf("%w: %v", ErrCache, err)
	case !fi.Mode().IsRegular():
		return diskCopy{}, fmt.Errorf("%w: %s is not a regular file", ErrCache, path)
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return diskCopy{}, err
		}
		return diskCopy{}, fmt.Errorf("%w: %v", ErrCache, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCacheBytes+1))
	if err != nil {
		return diskCopy{}, fmt.Errorf("%w: %v", ErrCache, err)
	}
	if len(b) > maxCacheBytes {
		return diskCopy{}, fmt.Errorf("%w: %s is larger than %d bytes", ErrCache, path, maxCacheBytes)
	}
	var c cacheFile
	if err := json.Unmarshal(b, &c); err != nil {
		return diskCopy{}, fmt.Errorf("%w: %s: %v", ErrCache, path, err)
	}
	bad := func(format string, a ...any) (diskCopy, error) {
		return diskCopy{}, fmt.Errorf("%w: %s: "+format, append([]any{ErrCache, path}, a...)...)
	}
	switch {
	case c.Version != cacheVersion:
		return bad("version %d, want %d", c.Version, cacheVersion)
	case c.Source != src.String():
		return bad("written for %q, not %q", truncate(c.Source), src.String())
	case c.Confirmed.IsZero():
		return bad("no confirmation time")
	case len(c.Documents) != len(src.locations):
		return bad("%d documents, the source has %d", len(c.Documents), len(src.locations))
	}
	docs := make([]docState, len(c.Documents))
	var all clientip.PrefixSet
	for i, d := range c.Documents {
		if d.Location != src.locations[i] {
			return bad("document %d is %q, want %q", i, truncate(d.Location), src.locations[i])
		}
		set, err := cachedSet(d.Prefixes, "documents["+strconv.Itoa(i)+"].prefixes", "document "+d.Location)
		if err != nil {
			return diskCopy{}, fmt.Errorf("%w: %s: %w", ErrCache, path, err)
		}
		docs[i] = docState{etag: d.ETag, lastModified: d.LastModified, set: set}
		all = all.Union(set)
	}
	if err := CheckSet(all, allowPrivate); err != nil {
		return diskCopy{}, fmt.Errorf("%w: %s: %w", ErrCache, path, err)
	}
	baseline := all
	if c.Baseline != nil {
		// The baseline is only measured against, never trusted, but it
		// must read as a set.
		if baseline, err = cachedSet(c.Baseline, "baseline", "the baseline"); err != nil {
			return diskCopy{}, fmt.Errorf("%w: %s: %w", ErrCache, path, err)
		}
	}
	return diskCopy{docs: docs, set: all, baseline: baseline, confirmed: c.Confirmed}, nil
}

// cachedSet parses a list of prefixes of the disk copy; field names the list
// in errors about an entry, what in errors about the whole.
func cachedSet(list []string, field, what string) (clientip.PrefixSet, error) {
	var ps []netip.Prefix
	for j, s := range list {
		p, reason := parsePrefix(s, anyFamily, false)
		if reason != "" {
			return clientip.PrefixSet{}, invalidEntry(field+"["+strconv.Itoa(j)+"]", s, reason)
		}
		ps = append(ps, p)
	}
	return finish(ps, what)
}

// writeCache replaces the disk copy atomically.
func writeCache(path string, src *Source, docs []docState, baseline clientip.PrefixSet, confirmed time.Time) error {
	c := cacheFile{Version: cacheVersion, Source: src.String(), Confirmed: confirmed.UTC()}
	for i, d := range docs {
		cd := cacheDoc{Location: src.locations[i], ETag: d.etag, LastModified: d.lastModified}
		for _, p := range d.set.Prefixes() {
			cd.Prefixes = append(cd.Prefixes, p.String())
		}
		c.Documents = append(c.Documents, cd)
	}
	for _, p := range baseline.Prefixes() {
		c.Baseline = append(c.Baseline, p.String())
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCache, err)
	}
	if err := writeFileAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("%w: %v", ErrCache, err)
	}
	return nil
}

// writeFileAtomic replaces path with data so that a crash at any point
// leaves either the old file or the new one, never a torn one: it writes a
// temporary file in the same directory, syncs it, renames it over path and
// syncs the directory so the rename itself is durable.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
