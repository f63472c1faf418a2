package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func rec(dev string, seq uint64) *Record {
	return &Record{
		ID: Key(dev, seq), Device: dev, Seq: seq, Received: time.Unix(1700000000, 0).UTC(),
		Protocol: "mqtt", Topic: "telemetry/" + dev, QoS: 1,
		Payload:    json.RawMessage(fmt.Sprintf(`{"device":%q,"seq":%d}`, dev, seq)),
		Provenance: Provenance{Client: "127.0.0.11", Source: "proxy-protocol", Peer: "127.0.0.200:40000"},
	}
}

func open(t *testing.T, path string, mode SyncMode) *Sink {
	t.Helper()
	s, err := Open(Config{Path: path, Sync: mode})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAppendWritesWholeLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sink.jsonl")
	s := open(t, path, SyncFsync)
	for i := range 3 {
		if r, err := s.Append(context.Background(), rec("d1", uint64(i))); err != nil || r.Duplicate {
			t.Fatalf("Append: %v %+v", err, r)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), b)
	}
	var got Record
	if err := json.Unmarshal([]byte(lines[2]), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "d1/2" || got.Provenance.Source != "proxy-protocol" || string(got.Payload) != `{"device":"d1","seq":2}` {
		t.Errorf("record = %+v", got)
	}
}

func TestDuplicates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sink.jsonl")
	s := open(t, path, SyncWrite)
	ctx := context.Background()
	if r, _ := s.Append(ctx, rec("d1", 5)); r.Duplicate {
		t.Fatal("first append reported duplicate")
	}
	if r, err := s.Append(ctx, rec("d1", 5)); err != nil || !r.Duplicate {
		t.Fatalf("second append: %+v %v, want duplicate", r, err)
	}
	if r, _ := s.Append(ctx, rec("d2", 5)); r.Duplicate {
		t.Fatal("other device's seq reported duplicate")
	}
	// Many concurrent copies of one id: exactly one is written.
	var wg sync.WaitGroup
	var mu sync.Mutex
	dups := 0
	for range 20 {
		wg.Go(func() {
			r, err := s.Append(ctx, rec("d3", 1))
			if err != nil {
				t.Error(err)
			}
			if r.Duplicate {
				mu.Lock()
				dups++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if dups != 19 {
		t.Errorf("%d of 20 concurrent copies reported duplicate, want 19", dups)
	}
	s.Close()
	// Reopen: the index is rebuilt from the file.
	s = open(t, path, SyncWrite)
	defer s.Close()
	if r, _ := s.Append(ctx, rec("d1", 5)); !r.Duplicate {
		t.Error("after reopen, a durable id was not recognised")
	}
	if st := s.Stats(); st.Existing != 3 {
		t.Errorf("Existing = %d, want 3", st.Existing)
	}
	sum, err := SummarizeFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Lines != 3 || sum.Duplicates != 0 || sum.Torn {
		t.Errorf("summary %+v", sum)
	}
}

func TestOpenCutsTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sink.jsonl")
	s := open(t, path, SyncWrite)
	s.Append(context.Background(), rec("d1", 1))
	s.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"d1/2","device":"d1","se`)
	f.Close()
	if sum, _ := SummarizeFile(path); !sum.Torn {
		t.Fatal("Summarize did not see the torn line")
	}
	s = open(t, path, SyncWrite)
	if st := s.Stats(); st.TornBytes != 30 || st.Existing != 1 {
		t.Errorf("stats %+v, want 30 torn bytes and 1 record", st)
	}
	if r, _ := s.Append(context.Background(), rec("d1", 2)); r.Duplicate {
		t.Error("the torn record counted as durable")
	}
	s.Close()
	sum, _ := SummarizeFile(path)
	if sum.Torn || sum.Lines != 2 || sum.Invalid != 0 {
		t.Errorf("summary %+v", sum)
	}
}

func TestFailureIsSticky(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sink.jsonl")
	s := open(t, path, SyncFsync)
	ctx := context.Background()
	if _, err := s.Append(ctx, rec("d1", 1)); err != nil {
		t.Fatal(err)
	}
	s.f.Close() // every later write fails
	if _, err := s.Append(ctx, rec("d1", 2)); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append on a broken file: %v, want ErrFailed", err)
	}
	if err := s.Healthy(); !errors.Is(err, ErrFailed) {
		t.Errorf("Healthy = %v", err)
	}
	if _, err := s.Append(ctx, rec("d1", 3)); !errors.Is(err, ErrFailed) {
		t.Errorf("Append after failure: %v", err)
	}
	s.Close()
	if _, err := s.Append(ctx, rec("d1", 4)); err == nil {
		t.Error("Append after Close succeeded")
	}
}

func TestGroupCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sink.jsonl")
	var mu sync.Mutex
	commits := 0
	s, err := Open(Config{Path: path, OnCommit: func(n, _ int, _ time.Duration, err error) {
		mu.Lock()
		commits++
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	const devices, each = 50, 40
	var wg sync.WaitGroup
	for d := range devices {
		wg.Go(func() {
			for i := range each {
				if _, err := s.Append(context.Background(), rec(fmt.Sprintf("d%d", d), uint64(i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Records != devices*each {
		t.Fatalf("records %d", st.Records)
	}
	if st.Batches >= st.Records/2 {
		t.Errorf("%d batches for %d records: group commit is not batching", st.Batches, st.Records)
	}
	t.Logf("%d records in %d fsync'ed batches (%.1f per batch)", st.Records, st.Batches, float64(st.Records)/float64(st.Batches))
	sum, _ := SummarizeFile(path)
	if sum.Unique != devices*each || sum.Duplicates != 0 {
		t.Errorf("summary %+v", sum)
	}
}

func TestIndexWindow(t *testing.T) {
	x := newIndex(128, 2)
	x.add("a", 1000)
	x.add("a", 900)
	for _, tc := range []struct {
		seq  uint64
		want bool
	}{{1000, true}, {900, true}, {999, false}, {872, false}, {1001, false}} {
		if got := x.has("a", tc.seq); got != tc.want {
			t.Errorf("has(a, %d) = %v", tc.seq, got)
		}
	}
	x.add("a", 1100) // slides: 900..972 leave the window
	if x.has("a", 900) {
		t.Error("900 still known after the window slid past it")
	}
	if !x.has("a", 1000) {
		t.Error("1000 forgotten")
	}
	x.add("a", 5000) // jump beyond the window clears it
	if x.has("a", 1100) || !x.has("a", 5000) {
		t.Error("jump did not clear the window")
	}
	x.add("b", 1)
	x.add("c", 1) // evicts one of a, b
	if len(x.devices) != 2 {
		t.Errorf("%d devices, want at most 2", len(x.devices))
	}
}

func TestEnqueueIsCommittedByClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sink.jsonl")
	s := open(t, path, SyncFsync)
	for i := range 100 {
		if err := s.Enqueue(context.Background(), rec("q0", uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if sum, _ := SummarizeFile(path); sum.Unique != 100 {
		t.Errorf("summary %+v", sum)
	}
	if err := s.Enqueue(context.Background(), rec("q0", 101)); !errors.Is(err, ErrClosed) {
		t.Errorf("Enqueue after Close: %v", err)
	}
}

// A reading is de-duplicated under its sender: the device and, when a client
// certificate authenticated it, the certificate's subject. Someone without
// the certificate who writes a certificate-bound device's (device, seq) first
// cannot make the genuine reading pass for a duplicate and go unwritten after
// it was acknowledged; the genuine sender's redelivery is still recognised,
// also after a restart (found by the project's review, 2026-12-02).
func TestDuplicatesAreSenderScoped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sink.jsonl")
	forged := rec("meter-1", 7)
	forged.Protocol, forged.Payload = "http", json.RawMessage(`{"device":"meter-1","seq":7,"temp":-999}`)
	genuine := rec("meter-1", 7)
	genuine.Provenance.TLSSubject = "CN=meter-1"
	s := open(t, path, SyncFsync)
	for _, tc := range []struct {
		name string
		r    *Record
		dup  bool
	}{
		{"forged, no certificate", forged, false},
		{"genuine, with the certificate", genuine, false},
		{"genuine redelivery", genuine, true},
		{"forged again", forged, true},
	} {
		if res, err := s.Append(t.Context(), tc.r); err != nil || res.Duplicate != tc.dup {
			t.Fatalf("%s: %+v, %v; want duplicate %v", tc.name, res, err, tc.dup)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, SyncFsync)
	defer s.Close()
	if res, err := s.Append(t.Context(), genuine); err != nil || !res.Duplicate {
		t.Fatalf("genuine redelivery after a restart: %+v, %v; want a duplicate", res, err)
	}
	sum, err := SummarizeFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Lines != 2 || sum.Count["meter-1/7"] != 2 {
		t.Errorf("summary %+v; want the forged and the genuine reading, once each", sum)
	}
}
