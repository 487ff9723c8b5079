package flurry

import (
	"context"
	"testing"
	"time"
)

// BenchmarkNextFromBuffer is Next's cost from a buffer that never runs out (no I/O).
func BenchmarkNextFromBuffer(b *testing.B) {
	c, err := New(Options{Endpoints: []string{"http://127.0.0.1:1"}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ids := make([]uint64, b.N+1024)
	c.cur.Store(&batch{ids: ids, n: int64(len(ids)), expires: c.mono() + time.Hour, triggerAt: -1})
	ctx := context.Background()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
