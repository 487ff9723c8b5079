package flurry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// h. Settings are validated once, by New, with an error naming the setting.
func TestSettingsValidation(t *testing.T) {
	ep := []string{"http://127.0.0.1:7609"}
	cases := []struct {
		opts    Options
		setting string
	}{
		{Options{}, "Endpoints"},
		{Options{Endpoints: []string{"127.0.0.1:7609"}}, "Endpoints"},
		{Options{Endpoints: []string{"http://a:1", "ftp://b"}}, "Endpoints"},
		{Options{Endpoints: ep, MinBatch: 20000}, "MinBatch"},
		{Options{Endpoints: ep, MinBatch: 100, MaxBatch: 50}, "MinBatch"},
		{Options{Endpoints: ep, MaxBatch: -1}, "MaxBatch"},
		{Options{Endpoints: ep, LowWater: 1}, "LowWater"},
		{Options{Endpoints: ep, LowWater: -0.5}, "LowWater"},
		{Options{Endpoints: ep, SegmentPrefetch: 1.5}, "SegmentPrefetch"},
		{Options{Endpoints: ep, SegmentRange: -3}, "SegmentRange"},
		{Options{Endpoints: ep, MaxAge: -time.Second}, "MaxAge"},
		{Options{Endpoints: ep, Timeout: -1}, "Timeout"},
		{Options{Endpoints: ep, Token: "a\nb"}, "Token"},
	}
	for _, tc := range cases {
		c, err := New(tc.opts)
		// A *SettingsError naming the setting, which is also an *Error INVALID_ARGUMENT.
		var se *SettingsError
		var fe *Error
		if c != nil || !errors.As(err, &se) || se.Setting != tc.setting ||
			!strings.HasPrefix(se.Message, tc.setting+": ") {
			t.Errorf("%+v: got %#v, want a *SettingsError naming %s", tc.opts, err, tc.setting)
			continue
		}
		if !errors.As(err, &fe) || fe.Code != "INVALID_ARGUMENT" || fe.Message != se.Message {
			t.Errorf("%+v: %v does not unwrap to an *Error INVALID_ARGUMENT", tc.opts, err)
		}
	}
	c, err := New(Options{Endpoints: []string{"http://127.0.0.1:7609/", "https://h.example:443"}})
	if err != nil {
		t.Fatal(err)
	}
	o := c.opts
	if o.MaxAge != time.Second || o.MinBatch != 256 || o.MaxBatch != 16384 || o.LowWater != 0.5 ||
		o.Timeout != 5*time.Second || o.SegmentRange != 1000 || o.SegmentPrefetch != 0.1 ||
		o.Endpoints[0] != "http://127.0.0.1:7609" {
		t.Errorf("defaults: %+v", o)
	}
	c.Close()
	if _, err := c.Next(context.Background()); err == nil || err.(*Error).Code != "CANCELLED" {
		t.Errorf("Next after Close: %v", err)
	}
}

// Next from a non-empty buffer allocates nothing.
func TestNextFromBufferDoesNotAllocate(t *testing.T) {
	c, err := New(Options{Endpoints: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids := make([]uint64, 1<<20)
	for i := range ids {
		ids[i] = uint64(i)
	}
	c.cur.Store(&batch{ids: ids, n: int64(len(ids)), expires: c.mono() + time.Hour, triggerAt: -1})
	ctx := context.Background()
	var last uint64
	allocs := testing.AllocsPerRun(10000, func() {
		id, err := c.Next(ctx)
		if err != nil || (id <= last && id != 0) {
			t.Fatalf("id %d after %d: %v", id, last, err)
		}
		last = id
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Next", allocs)
	}
}

// A batch whose request was sent more than MaxAge ago is dropped whole (fake monotonic clock).
func TestStaleBatchDropped(t *testing.T) {
	now := time.Duration(0)
	c, err := New(Options{Endpoints: []string{"http://127.0.0.1:1"}, Timeout: 50 * time.Millisecond,
		mono: func() time.Duration { return now }, sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.layout.Store(&Layout{Bits: 63, MaxBatch: 1000, UnitNs: 1})
	c.batchSize = 1024
	c.cur.Store(&batch{ids: []uint64{1, 2, 3}, n: 3, expires: time.Second, triggerAt: -1})
	if id, err := c.Next(context.Background()); err != nil || id != 1 {
		t.Fatalf("got %d %v", id, err)
	}
	now = time.Second // the batch's max age is reached: 2 and 3 must never come out
	_, err = c.Next(context.Background())
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("got %v, want an error (nothing listens on port 1)", err)
	}
	c.mu.Lock()
	dropped, size := c.droppedAge, c.batchSize
	c.mu.Unlock()
	if dropped || size != 1024 {
		t.Errorf("after the drop: droppedAge %v (want it consumed by the refill), batch %d (want 1024 again: the refill failed)", dropped, size)
	}
}
