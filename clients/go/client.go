// Package flurry is the Go client of flurry, a distributed unique-ID service.
//
// A Client keeps a prefetch buffer of snowflake IDs (one refill in flight, whatever the number
// of callers), caches segment ranges per tag, retries only where the server says it helps,
// fails over between endpoints and decodes IDs locally. The contract it follows is
// docs/clients.md of the flurry repository. A Client is safe for concurrent use.
package flurry

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Client hands out IDs from servers of one flurry fleet. Safe for concurrent use; make one per
// process and share it.
type Client struct {
	opts      Options
	endpoints []string
	auth      string
	http      *http.Client
	ownsHTTP  bool
	preferred atomic.Int32 // the endpoint that last answered: tried first

	base     time.Time // monotonic origin of mono()
	mono     func() time.Duration
	sleep    func(ctx context.Context, d time.Duration) error
	random   func() float64
	lifetime context.Context // cancelled by Close: ends refills in flight
	cancel   context.CancelFunc

	// The prefetch buffer. cur is read without a lock (an atomic index into its IDs); mu
	// guards switching batches and starting refills.
	cur        atomic.Pointer[batch]
	mu         sync.Mutex
	pending    []*batch     // fetched batches behind cur, oldest first
	refill     *flight      // the one refill in flight, nil when none
	batchSize  int          // the size the last refill asked for; 0 before the first
	droppedAge bool         // IDs were dropped for age since the last refill started
	refillBody bytes.Buffer // the refills' response buffer, reused (one refill at a time)
	closed     bool

	layoutMu sync.Mutex
	layout   atomic.Pointer[Layout]

	segmentsMu sync.Mutex
	segments   map[string]*Segment

	// TSO: callers not yet in a request and whether tsoRun runs (under tsoMu); the leader that
	// last answered, "" for the endpoints (only tsoRun touches it, one at a time).
	tsoMu     sync.Mutex
	tsoQueue  []*tsoWaiter
	tsoBusy   bool
	tsoLeader string
}

// batch is one refill's IDs. pos is the next index to take; takers claim indexes with an
// atomic add, so each ID is handed out at most once without a lock.
type batch struct {
	_         [64]byte // keep pos on its own cache line
	pos       atomic.Int64
	_         [56]byte
	ids       []uint64
	n         int64
	expires   time.Duration // monotonic: sent + MaxAge
	triggerAt int64         // the taker of this index starts the next refill (low water)
}

var emptyBatch = &batch{}

// New validates opts once and makes a client; it sends nothing yet (the layout is read on
// first need). A bad setting is a *SettingsError naming it (which unwraps to an *Error with
// code INVALID_ARGUMENT).
func New(opts Options) (*Client, error) {
	o, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	c := &Client{opts: o, endpoints: o.Endpoints, http: o.HTTPClient, base: time.Now(),
		mono: o.mono, sleep: o.sleep, random: o.random, segments: map[string]*Segment{}}
	if o.Token != "" {
		c.auth = "Bearer " + o.Token
	}
	if c.http == nil {
		c.http = &http.Client{Transport: newTransport()}
		c.ownsHTTP = true
	}
	if c.mono == nil {
		c.mono = func() time.Duration { return time.Since(c.base) }
	}
	if c.sleep == nil {
		c.sleep = defaultSleep
	}
	if c.random == nil {
		c.random = lockedRandom()
	}
	c.lifetime, c.cancel = context.WithCancel(context.Background())
	c.cur.Store(emptyBatch)
	return c, nil
}

// wall converts a monotonic deadline into a wall-clock time for contexts.
func (c *Client) wall(deadline time.Duration) time.Time {
	return time.Now().Add(deadline - c.mono())
}

// callDeadline is the sooner of ctx's deadline and Timeout from now, on the monotonic clock.
func (c *Client) callDeadline(ctx context.Context) time.Duration {
	now := c.mono()
	d := now + c.opts.Timeout
	if t, ok := ctx.Deadline(); ok {
		if cd := now + time.Until(t); cd < d {
			d = cd
		}
	}
	return d
}

// Next returns one snowflake ID from the prefetch buffer, waiting for the refill in flight
// when the buffer is empty (until ctx's deadline or Timeout, whichever is sooner). Taken from
// a non-empty buffer it does no I/O and allocates nothing (ctx is only consulted when it must
// wait). Safe for concurrent use.
func (c *Client) Next(ctx context.Context) (uint64, error) {
	b := c.cur.Load()
	i := b.pos.Add(1) - 1
	if i < b.n && c.mono() < b.expires {
		if i == b.triggerAt {
			c.lowWater()
		}
		return b.ids[i], nil
	}
	id, err := c.nextSlow(ctx)
	if err != nil {
		return 0, err
	}
	return id, nil
}

// lowWater starts a refill unless one is running or a fetched batch is already waiting.
func (c *Client) lowWater() {
	c.mu.Lock()
	if c.refill == nil && len(c.pending) == 0 && !c.closed {
		c.startRefillLocked()
	}
	c.mu.Unlock()
}

// takeLocked takes one fresh ID, moving past exhausted and stale batches; false when the
// buffer is empty. c.mu held.
func (c *Client) takeLocked() (uint64, bool) {
	for {
		b := c.cur.Load()
		if b.n > 0 && c.mono() >= b.expires {
			if b.pos.Load() < b.n {
				c.droppedAge = true // dropped whole, none of its IDs handed out any more
			}
			c.advanceLocked()
			continue
		}
		if b.pos.Load() < b.n {
			i := b.pos.Add(1) - 1
			if i < b.n {
				if i == b.triggerAt && c.refill == nil && len(c.pending) == 0 {
					c.startRefillLocked()
				}
				return b.ids[i], true
			}
		}
		if len(c.pending) == 0 {
			if b != emptyBatch {
				c.cur.Store(emptyBatch)
			}
			return 0, false
		}
		c.advanceLocked()
	}
}

// advanceLocked makes the oldest pending batch current (or the empty one). c.mu held.
func (c *Client) advanceLocked() {
	if len(c.pending) == 0 {
		c.cur.Store(emptyBatch)
		return
	}
	next := c.pending[0]
	c.pending[0] = nil
	c.pending = c.pending[1:]
	c.cur.Store(next)
}

func (c *Client) nextSlow(ctx context.Context) (uint64, *Error) {
	deadline := c.callDeadline(ctx)
	c.mu.Lock()
	for {
		if c.closed {
			c.mu.Unlock()
			return 0, errClosed()
		}
		if id, ok := c.takeLocked(); ok {
			c.mu.Unlock()
			return id, nil
		}
		f := c.refill
		if f == nil {
			f = c.startRefillLocked()
		}
		f.extend(deadline)
		c.mu.Unlock()
		if err := c.waitFlight(ctx, f, deadline); err != nil {
			return 0, err
		}
		c.mu.Lock()
	}
}

type batchEvent int

const (
	eventFirst   batchEvent = iota // the first refill
	eventLow                       // the previous batch ran low before anything expired
	eventExpired                   // IDs were dropped for age since the previous refill
)

// nextBatchSize is the size a refill asks for after event, between minBatch and
// min(maxBatch, serverMax): doubling when the buffer ran low, halving when IDs expired.
func nextBatchSize(prev int, event batchEvent, minBatch, maxBatch, serverMax int) int {
	hi := maxBatch
	if serverMax < hi {
		hi = serverMax
	}
	lo := minBatch
	if hi < lo {
		lo = hi
	}
	switch event {
	case eventFirst:
		return lo
	case eventExpired:
		prev /= 2
	default:
		prev *= 2
	}
	if prev < lo {
		return lo
	}
	if prev > hi {
		return hi
	}
	return prev
}

// startRefillLocked starts the one refill; c.mu held and c.refill nil.
func (c *Client) startRefillLocked() *flight {
	event := eventLow
	if c.batchSize == 0 {
		event = eventFirst
	} else if c.droppedAge {
		event = eventExpired
	}
	c.droppedAge = false
	f := newFlight(c.mono() + c.opts.Timeout)
	c.refill = f
	go c.runRefill(f, event)
	return f
}

func (c *Client) runRefill(f *flight, event batchEvent) {
	layout, err := c.getLayout(c.lifetime, f.currentDeadline, f.waiting)
	var ids []uint64
	var sentAt time.Duration
	size := 0
	if err == nil {
		c.mu.Lock()
		prev := c.batchSize
		c.batchSize = nextBatchSize(prev, event, c.opts.MinBatch, c.opts.MaxBatch, layout.MaxBatch)
		size = c.batchSize
		c.mu.Unlock()
		ids, sentAt, err = c.fetchIDs(c.lifetime, size, &c.refillBody, f.currentDeadline, f.waiting)
		if err != nil { // no batch came: the next refill sizes from the last one that did
			c.mu.Lock()
			c.batchSize = prev
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	c.refill = nil
	if err == nil && !c.closed && len(ids) > 0 {
		b := &batch{ids: ids, n: int64(len(ids)), expires: sentAt + c.opts.MaxAge}
		lowMark := int64(c.opts.LowWater*float64(size) + 0.999999)
		b.triggerAt = b.n - lowMark
		if b.triggerAt < 0 {
			b.triggerAt = 0
		}
		cur := c.cur.Load()
		if cur.pos.Load() < cur.n && c.mono() < cur.expires {
			c.pending = append(c.pending, b)
		} else {
			if cur.n > 0 && cur.pos.Load() < cur.n {
				c.droppedAge = true
			}
			if len(c.pending) > 0 { // all older than b: only reachable after an expiry race
				c.pending = c.pending[:0]
			}
			c.cur.Store(b)
		}
	}
	f.finish(err)
	c.mu.Unlock()
}

// fetchIDs asks for count IDs (GET /v1/ids?count=N&format=text); the IDs and when the
// request that brought them was sent.
func (c *Client) fetchIDs(ctx context.Context, count int, into *bytes.Buffer, deadline func() time.Duration,
	onWait func(*Error, time.Duration)) ([]uint64, time.Duration, *Error) {
	a, err := c.do(ctx, "/v1/ids?count="+strconv.Itoa(count)+"&format=text", into, deadline, onWait)
	if err != nil {
		return nil, 0, err
	}
	ids, perr := parseIDLines(a.body, count)
	if perr != nil {
		return nil, 0, perr
	}
	if len(ids) == 0 || len(ids) > count { // never an empty batch: waiters would ask again at once
		return nil, 0, &Error{Code: "UNKNOWN", Message: fmt.Sprintf("asked for %d IDs, the answer has %d", count, len(ids))}
	}
	return ids, a.sentAt, nil
}

// parseIDLines reads one decimal ID per line (the refill's hot loop: 16,384 lines a time).
// Lines as long as the one before (IDs of one batch have the same length) are read eight
// digits at a time; others, and anything unusual, digit by digit.
func parseIDLines(body []byte, capacity int) ([]uint64, *Error) {
	ids := make([]uint64, 0, capacity)
	width := 0 // the previous line's length
	for i := 0; i < len(body); {
		if width >= 16 && width <= 19 && i+width < len(body) && body[i+width] == '\n' {
			if v, ok := parseDigits16to19(body[i : i+width]); ok {
				ids = append(ids, v)
				i += width + 1
				continue
			}
		}
		start := i
		var v uint64
		for ; i < len(body) && body[i] != '\n'; i++ {
			d := body[i] - '0'
			if d > 9 {
				if body[i] == '\r' && i+1 < len(body) && body[i+1] == '\n' {
					continue
				}
				return nil, &Error{Code: "UNKNOWN", Message: "the response is not one decimal ID per line: " +
					strconv.Quote(string(body[start:min(len(body), start+40)]))}
			}
			v = v*10 + uint64(d)
		}
		line := body[start:i]
		i++ // past '\n'
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		width = len(line)
		if len(line) == 0 {
			continue
		}
		if len(line) > 19 { // may not fit: 19 digits always do
			var err error
			if v, err = strconv.ParseUint(string(line), 10, 64); err != nil {
				return nil, &Error{Code: "UNKNOWN", Message: "an ID in the response is not below 2^64: " + string(line)}
			}
		}
		ids = append(ids, v)
	}
	return ids, nil
}

// parseDigits16to19 reads 16 to 19 decimal digits (the first 16 as two 8-byte words); false if
// any byte is not a digit.
func parseDigits16to19(b []byte) (uint64, bool) {
	hi, lo := binary.LittleEndian.Uint64(b[0:8]), binary.LittleEndian.Uint64(b[8:16])
	if !eightDigits(hi) || !eightDigits(lo) {
		return 0, false
	}
	v := parseEightDigits(hi)*100_000_000 + parseEightDigits(lo)
	for _, ch := range b[16:] {
		d := ch - '0'
		if d > 9 {
			return 0, false
		}
		v = v*10 + uint64(d)
	}
	return v, true
}

// eightDigits tells whether all 8 bytes of w are '0'..'9'.
func eightDigits(w uint64) bool {
	return (w&0xF0F0F0F0F0F0F0F0)|(((w+0x0606060606060606)&0xF0F0F0F0F0F0F0F0)>>4) == 0x3333333333333333
}

// parseEightDigits reads 8 ASCII digits, the first in the lowest byte.
func parseEightDigits(w uint64) uint64 {
	w = (w & 0x0F0F0F0F0F0F0F0F) * 2561 >> 8
	w = (w & 0x00FF00FF00FF00FF) * 6553601 >> 16
	return (w & 0x0000FFFF0000FFFF) * 42949672960001 >> 32
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// NextN returns n increasing IDs (1 ≤ n ≤ the server's max_batch): from the buffer when it
// holds n fresh ones, else with one request of its own (not a refill), leaving the buffer to
// other callers. Safe for concurrent use.
func (c *Client) NextN(ctx context.Context, n int) ([]uint64, error) {
	deadline := c.callDeadline(ctx)
	dl := func() time.Duration { return deadline }
	layout, err := c.getLayout(ctx, dl, nil)
	if err != nil {
		return nil, err
	}
	if n < 1 || n > layout.MaxBatch {
		return nil, invalidArgument("n: %d is outside 1..%d (the server's max_batch)", n, layout.MaxBatch)
	}
	if c.isClosed() {
		return nil, errClosed()
	}
	b := c.cur.Load()
	for {
		p := b.pos.Load()
		if p+int64(n) > b.n || c.mono() >= b.expires {
			break
		}
		if b.pos.CompareAndSwap(p, p+int64(n)) {
			out := make([]uint64, n)
			copy(out, b.ids[p:p+int64(n)])
			if b.triggerAt >= p && b.triggerAt < p+int64(n) {
				c.lowWater()
			}
			return out, nil
		}
	}
	ids, _, ferr := c.fetchIDs(ctx, n, nil, dl, nil)
	if ferr != nil {
		return nil, ferr
	}
	return ids, nil
}

func (c *Client) isClosed() bool {
	return c.lifetime.Err() != nil
}

// Close drops the buffered IDs (never handed out later), ends any refill in flight and
// closes idle connections. Calls after Close, and calls waiting when it runs, fail at once
// with code CANCELLED ("the client is closed"). Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.pending = nil
	c.cur.Store(emptyBatch)
	c.mu.Unlock()
	c.cancel()
	if c.ownsHTTP {
		c.http.CloseIdleConnections()
	}
	return nil
}

// getLayout reads /v1/layout once (from the first endpoint that answers) and keeps it.
func (c *Client) getLayout(ctx context.Context, deadline func() time.Duration,
	onWait func(*Error, time.Duration)) (*Layout, *Error) {
	if l := c.layout.Load(); l != nil {
		return l, nil
	}
	c.layoutMu.Lock()
	defer c.layoutMu.Unlock()
	if l := c.layout.Load(); l != nil {
		return l, nil
	}
	a, err := c.do(ctx, "/v1/layout", nil, deadline, onWait)
	if err != nil {
		return nil, err
	}
	l, perr := ParseLayout(a.body)
	if perr != nil {
		return nil, &Error{Code: "UNKNOWN", Message: perr.Error()}
	}
	c.layout.Store(l)
	return l, nil
}

// Layout returns the servers' layout, read from /v1/layout on first need.
func (c *Client) Layout(ctx context.Context) (*Layout, error) {
	deadline := c.callDeadline(ctx)
	l, err := c.getLayout(ctx, func() time.Duration { return deadline }, nil)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Decode decodes id locally from the layout (read once from /v1/layout), with exactly the
// server's results. An ID with bits above the layout's is INVALID_ARGUMENT.
func (c *Client) Decode(ctx context.Context, id uint64) (Decoded, error) {
	if c.isClosed() {
		return Decoded{}, errClosed()
	}
	l, err := c.Layout(ctx)
	if err != nil {
		return Decoded{}, err
	}
	return l.Decode(id)
}

// DecodeString decodes an ID given as text (plain decimal digits, below 2^64).
func (c *Client) DecodeString(ctx context.Context, text string) (Decoded, error) {
	id, err := parseID(text)
	if err != nil {
		return Decoded{}, err
	}
	return c.Decode(ctx, id)
}
