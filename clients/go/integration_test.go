//go:build integration

package flurry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// takeConcurrently has callers goroutines take perCaller IDs each with next; each caller's IDs
// in the order it got them.
func takeConcurrently(t *testing.T, callers, perCaller int, next func() (uint64, error)) [][]uint64 {
	t.Helper()
	out := make([][]uint64, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			ids := make([]uint64, 0, perCaller)
			for len(ids) < perCaller {
				id, err := next()
				if err != nil {
					errs[g] = err
					return
				}
				ids = append(ids, id)
			}
			out[g] = ids
		}(g)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkDistinctIncreasing fails unless every caller's IDs strictly increase and no ID is
// repeated across callers.
func checkDistinctIncreasing(t *testing.T, perCaller [][]uint64) {
	t.Helper()
	var all []uint64
	for g, ids := range perCaller {
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("caller %d: ID %d after %d", g, ids[i], ids[i-1])
			}
		}
		all = append(all, ids...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d handed out twice", all[i])
		}
	}
}

// a. 10^6 IDs by 32 callers: distinct, each caller's increasing, one request in flight, few
// requests. -short (the -race run) takes 10^5.
func TestConcurrentCallers(t *testing.T) {
	// The contract's ramp, 256 .. 16384 doubling, is 7 requests for the first 32,512 IDs.
	total, maxRequests := 1_000_000, int64(100)
	if testing.Short() {
		total, maxRequests = 100_000, 7+5+2
	}
	const callers = 32
	c := newClient(t, Options{})
	resetStats(t)
	before := idRequests(t, "200")
	start := time.Now()
	ids := takeConcurrently(t, callers, total/callers, func() (uint64, error) { return c.Next(bg) })
	elapsed := time.Since(start)
	after := idRequests(t, "200")
	for i := range endpoints(t) {
		if s := stats(t, i); s.IDs.MaxInFlight > 1 {
			t.Errorf("proxy %d saw %d ID requests in flight at once", i, s.IDs.MaxInFlight)
		}
	}
	checkDistinctIncreasing(t, ids)
	if after-before > maxRequests {
		t.Errorf("%d ID requests for %d IDs, want at most %d", after-before, total, maxRequests)
	}
	t.Logf("%d IDs by %d callers in %v (%.1f M/s), %d requests", total, callers, elapsed,
		float64(total)/elapsed.Seconds()/1e6, after-before)
}

// b. Max age: no ID handed out is older than MaxAge by its own time, after the buffer idled.
func TestMaxAge(t *testing.T) {
	const maxAge = 200 * time.Millisecond
	c := newClient(t, Options{MaxAge: maxAge})
	if _, err := c.Next(bg); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		time.Sleep(2 * maxAge) // the idle time itself is the behaviour under test
		resetStats(t)
		for i := 0; i < 20; i++ {
			floor := time.Now().Add(-maxAge - time.Millisecond).UnixMilli()
			id, err := c.Next(bg)
			if err != nil {
				t.Fatal(err)
			}
			d, err := c.Decode(bg, id)
			if err != nil {
				t.Fatal(err)
			}
			if d.UnixMs < floor {
				t.Fatalf("round %d: ID %d from %s is older than max age (floor %d ms)", round, id, d.Time, floor)
			}
		}
		if s := stats(t, 0); s.IDs.Requests < 1 {
			t.Fatalf("round %d: no new ID request after the buffer aged: %+v", round, s)
		}
	}
}

// c. 503 with Retry-After 1, twice: the call succeeds after the waits the server asked for; with
// a timeout shorter than the wait it fails at once with the server's reason.
func TestRetryAfter(t *testing.T) {
	restoreFleet(t)
	one := endpoints(t)[:1]
	c := newClient(t, Options{Endpoints: one})
	if _, err := c.Layout(bg); err != nil {
		t.Fatal(err)
	}
	resetStats(t)
	control(t, "POST", "/servers/0/fault?status=503&count=2&retry_after=1&reason=LEASE_EXPIRING")
	start := time.Now()
	if _, err := c.Next(bg); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 2*time.Second || el >= 5*time.Second {
		t.Errorf("succeeded after %v, want 2 s .. timeout", el)
	}
	if s := stats(t, 0); s.Faulted != 2 || s.IDs.Requests != 3 {
		t.Errorf("proxy: %+v, want 2 faulted of 3", s)
	}

	fast := newClient(t, Options{Endpoints: one, Timeout: 500 * time.Millisecond})
	if _, err := fast.Layout(bg); err != nil {
		t.Fatal(err)
	}
	control(t, "POST", "/servers/0/fault?status=503&count=2&retry_after=1&reason=LEASE_EXPIRING")
	start = time.Now()
	_, err := fast.Next(bg)
	el := time.Since(start)
	fe := flurryError(t, err)
	if fe.Code != "UNAVAILABLE" || fe.Reason != "LEASE_EXPIRING" || fe.HTTPStatus != 503 ||
		!fe.HasRetryAfter || fe.RetryAfter != time.Second || fe.Endpoint != one[0] {
		t.Errorf("got %+v", fe)
	}
	if el > 300*time.Millisecond {
		t.Errorf("failed after %v, want at once", el)
	}
}

// The retry loop's waits and failover, without sleeping: the sleep and jitter are injected.
func TestRetryScheduleAndFailover(t *testing.T) {
	restoreFleet(t)
	var waits []time.Duration
	var mu sync.Mutex
	sleep := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return nil
	}
	c := newClient(t, Options{Endpoints: endpoints(t)[:1], sleep: sleep, random: func() float64 { return 0.5 }})
	control(t, "POST", "/servers/0/fault?status=503&count=3&retry_after=2&reason=CLOCK_BEHIND")
	if _, err := c.NextN(bg, 10); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{2200 * time.Millisecond, 2200 * time.Millisecond, 2200 * time.Millisecond}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", waits, want)
	}

	// No Retry-After: backoff 0.1 s × 2^r; a failover answer (503 without Retry-After) moves to
	// the next endpoint at once and never back in this call.
	waits = nil
	both := newClient(t, Options{sleep: sleep, random: func() float64 { return 0 }})
	resetStats(t)
	control(t, "POST", "/servers/0/fault?status=503&count=5&code=FAILED_PRECONDITION&reason=LEASE_LOST")
	control(t, "POST", "/servers/1/fault?status=502&count=2&retry_after=0")
	ids, err := both.NextN(bg, 10)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := both.Decode(bg, ids[0])
	if d.Node != serverNode(t, 1) {
		t.Errorf("IDs from node %d, want server 1's", d.Node)
	}
	if s0, s1 := stats(t, 0), stats(t, 1); s0.Faulted != 1 || s1.Faulted != 2 || s1.IDs.Requests != 3 {
		t.Errorf("proxies: %+v %+v, want server 0 tried once, server 1 three times", s0, s1)
	}
	if want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}; fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
}

// d. A 4xx is never retried.
func TestClientErrorsNotRetried(t *testing.T) {
	restoreFleet(t)
	c := newClient(t, Options{})
	if _, err := c.Layout(bg); err != nil {
		t.Fatal(err)
	}
	resetStats(t)
	_, err := c.Segment("no-such-tag").Next(bg)
	if fe := flurryError(t, err); fe.Code != "NOT_FOUND" || fe.HTTPStatus != 404 || fe.Message == "" {
		t.Errorf("got %+v", fe)
	}
	if n := stats(t, 0).Segments.Requests + stats(t, 1).Segments.Requests; n != 1 {
		t.Errorf("%d segment requests, want 1", n)
	}

	resetStats(t)
	control(t, "POST", "/servers/0/fault?status=400&count=1&code=INVALID_ARGUMENT&retry_after=1")
	_, err = c.Next(bg)
	if fe := flurryError(t, err); fe.Code != "INVALID_ARGUMENT" || fe.HTTPStatus != 400 || fe.Message != "injected by fleet.py" {
		t.Errorf("got %+v", fe)
	}
	if n := stats(t, 0).IDs.Requests + stats(t, 1).IDs.Requests; n != 1 {
		t.Errorf("%d ID requests, want 1", n)
	}
	// The failed refill is over: the next call starts a new one and succeeds.
	if _, err := c.Next(bg); err != nil {
		t.Fatal(err)
	}
}

// orderNumber issues one order number from server 0 (of tag's numbers when tag is set).
func orderNumber(t *testing.T, tag string) string {
	t.Helper()
	url := servers(t)[0] + "/v1/order-numbers?count=1"
	if tag != "" {
		url += "&tag=" + tag
	}
	resp, err := plainHTTP.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		OrderNumbers []string `json:"order_numbers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.OrderNumbers) != 1 {
		t.Fatalf("order numbers from %s: %d %v", url, resp.StatusCode, err)
	}
	return body.OrderNumbers[0]
}

// h. DecodeOrder: the typed value of both variants, the token sent (the client's or the
// call's), a mistyped number the server's 400 at once. The fleet has an order key
// (CMakeLists.txt).
func TestDecodeOrder(t *testing.T) {
	restoreFleet(t)
	token := fleetEnv(t, "FLURRY_TEST_ADMIN_TOKEN")[0]
	tok := newClient(t, Options{Token: token})
	code := orderNumber(t, "")
	o, err := tok.DecodeOrder(bg, code)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tok.Decode(bg, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o.OrderNumber != code || o.KeyVersion != "1" || o.Source != SourceSnowflake || o.Tag != "" ||
		o.Decoded == nil || o.Decoded.Time != d.Time || o.Decoded.Node != d.Node || o.Decoded.Seq != d.Seq {
		t.Fatalf("got %+v (decoded %+v), want the snowflake variant of %+v", o, o.Decoded, d)
	}
	segCode := orderNumber(t, "orders")
	seg, err := tok.DecodeSegmentOrder(bg, "orders", segCode)
	if err != nil {
		t.Fatal(err)
	}
	if seg.Source != SourceSegment || seg.Tag != "orders" || seg.Decoded != nil || seg.ID == 0 || seg.OrderNumber != segCode {
		t.Fatalf("got %+v, want the segment variant", seg)
	}
	bad := []byte(code)
	bad[len(bad)-1] = '0' + (bad[len(bad)-1]-'0'+1)%10
	_, err = tok.DecodeOrder(bg, string(bad))
	if fe := flurryError(t, err); fe.Code != "INVALID_ARGUMENT" || fe.HTTPStatus != 400 {
		t.Errorf("a mistyped number: got %+v", fe)
	}
	anon := newClient(t, Options{})
	_, err = anon.DecodeOrder(bg, code)
	if fe := flurryError(t, err); fe.Code != "UNAUTHENTICATED" || fe.HTTPStatus != 401 {
		t.Errorf("without a token: got %+v", fe)
	}
	again, err := anon.DecodeOrderWith(bg, code, DecodeOrderOptions{Token: token})
	if err != nil || again.ID != o.ID {
		t.Errorf("with the call's token: got %+v, %v", again, err)
	}
}

func checkClosed(t *testing.T, what string, err error) {
	t.Helper()
	var fe *Error
	if !errors.As(err, &fe) || fe.Code != "CANCELLED" || fe.Message != "the client is closed" || fe.Reason != "" ||
		fe.HTTPStatus != 0 {
		t.Errorf("%s: got %v, want CANCELLED \"the client is closed\"", what, err)
	}
}

// Close: every call after it, and every call waiting when it runs (for a held answer, another
// caller's refill, a range, or between retry rounds), fails at once with CANCELLED.
func TestClose(t *testing.T) {
	restoreFleet(t)
	const held = 8 * time.Second
	c := newClient(t, Options{Token: fleetEnv(t, "FLURRY_TEST_ADMIN_TOKEN")[0], Timeout: time.Minute})
	if _, err := c.Decode(bg, 1); err != nil { // the layout is read before the servers are held
		t.Fatal(err)
	}
	code := orderNumber(t, "")
	for i := range servers(t) {
		control(t, "POST", fmt.Sprintf("/servers/%d/delay?ms=%d&count=100", i, held.Milliseconds()))
	}
	calls := map[string]func() error{
		"Next":        func() error { _, err := c.Next(bg); return err },
		"Next again":  func() error { _, err := c.Next(bg); return err },
		"NextN":       func() error { _, err := c.NextN(bg, 100); return err },
		"Segment":     func() error { _, err := c.Segment("orders").Next(bg); return err },
		"DecodeOrder": func() error { _, err := c.DecodeOrder(bg, code); return err },
	}
	errs := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, call := range calls {
		wg.Add(1)
		go func(name string, call func() error) {
			defer wg.Done()
			err := call()
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		}(name, call)
	}
	time.Sleep(time.Second) // every call is now waiting
	closedAt := time.Now()
	c.Close()
	wg.Wait()
	if took := time.Since(closedAt); took > held-2*time.Second {
		t.Errorf("the calls ended %v after Close, as late as the held answers", took)
	}
	for name := range calls {
		checkClosed(t, name+" waiting", errs[name])
	}
	c.Close() // idempotent
	for name, call := range calls {
		checkClosed(t, name+" after Close", call())
	}
	_, err := c.Decode(bg, 1)
	checkClosed(t, "Decode after Close", err)

	for i := range servers(t) {
		control(t, "POST", fmt.Sprintf("/servers/%d/delay?ms=0&count=0", i))
		control(t, "POST", fmt.Sprintf("/servers/%d/fault?status=503&retry_after=30&count=100", i))
	}
	c = newClient(t, Options{Timeout: time.Minute})
	done := make(chan error, 1)
	go func() { _, err := c.NextN(bg, 5); done <- err }()
	time.Sleep(time.Second) // waiting 30 s between rounds
	closedAt = time.Now()
	c.Close()
	checkClosed(t, "NextN between retry rounds", <-done)
	if took := time.Since(closedAt); took > 10*time.Second {
		t.Errorf("ended %v after Close", took)
	}
}

// e. Failover: server 0 killed, IDs keep coming from server 1, none twice.
func TestFailover(t *testing.T) {
	restoreFleet(t)
	c := newClient(t, Options{})
	seen := map[uint64]bool{}
	take := func() uint64 {
		id, err := c.Next(bg)
		if err != nil {
			t.Fatal(err)
		}
		if seen[id] {
			t.Fatalf("ID %d handed out twice", id)
		}
		seen[id] = true
		return id
	}
	layout, err := c.Layout(bg)
	if err != nil {
		t.Fatal(err)
	}
	node0, node1 := serverNode(t, 0), serverNode(t, 1)
	for i := 0; i < 5000; i++ {
		if d, _ := layout.Decode(take()); d.Node != node0 {
			t.Fatalf("an ID from node %d before the kill, want server 0's %d", d.Node, node0)
		}
	}
	control(t, "POST", "/servers/0/kill")
	fromServer1 := 0
	for i := 0; i < 200_000 && fromServer1 < 5000; i++ {
		if d, _ := layout.Decode(take()); d.Node == node1 {
			fromServer1++
		}
	}
	if fromServer1 < 5000 {
		t.Fatalf("only %d IDs from server 1 after server 0 was killed", fromServer1)
	}
}

// f. Server 0 killed while the refill is in flight: next() gets an ID from server 1 long before
// its timeout.
func TestKilledDuringRefill(t *testing.T) {
	restoreFleet(t)
	c := newClient(t, Options{})
	layout, err := c.Layout(bg)
	if err != nil {
		t.Fatal(err)
	}
	resetStats(t)
	control(t, "POST", "/servers/0/delay?ms=3000&count=1")
	type result struct {
		id  uint64
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		id, err := c.Next(bg)
		done <- result{id, err}
	}()
	waitFor(t, "the refill held by server 0's proxy", func() bool { return stats(t, 0).IDs.InFlight == 1 })
	time.Sleep(300*time.Millisecond - time.Since(start)) // as the issue says: kill ~300 ms in
	control(t, "POST", "/servers/0/kill")
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if el := time.Since(start); el > 2500*time.Millisecond {
		t.Errorf("next() took %v", el)
	}
	if d, _ := layout.Decode(r.id); d.Node != serverNode(t, 1) {
		t.Errorf("ID %d from node %d, want server 1's", r.id, d.Node)
	}
}

// g. Segment numbers: once each, in order per caller, one range request in flight per tag.
func TestSegments(t *testing.T) {
	tag := fleetEnv(t, "FLURRY_TEST_TAGS")[0]
	c := newClient(t, Options{SegmentRange: 100})
	resetStats(t)
	total := 5000
	ids := takeConcurrently(t, 8, total/8, func() (uint64, error) { return c.Segment(tag).Next(bg) })
	checkDistinctIncreasing(t, ids)
	var requests int
	for i := range endpoints(t) {
		s := stats(t, i)
		requests += s.Segments.Requests
		if s.Segments.MaxInFlight > 1 {
			t.Errorf("proxy %d saw %d segment requests in flight at once", i, s.Segments.MaxInFlight)
		}
	}
	if requests < total/100 {
		t.Errorf("%d range requests, want at least %d", requests, total/100)
	}
	if c.Segment(tag) != c.Segment(tag) {
		t.Error("two handles for one tag")
	}

	// The double buffer: once SegmentPrefetch (10%) of a range is used, the next range is
	// fetched in the background, and next() moves to it without a request when the first is
	// used up.
	seq := newClient(t, Options{SegmentRange: 100})
	s := seq.Segment(tag)
	var got []uint64
	take := func(n int) {
		for i := 0; i < n; i++ {
			v, err := s.Next(bg)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
	}
	resetStats(t)
	prefetched := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.next.count > 0
	}
	take(10)
	waitFor(t, "the prefetched range", prefetched)
	take(190) // the rest of the first range and all of the second
	waitFor(t, "the third range, prefetched in the background", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.fetch == nil && (s.cur.taken < s.cur.count || s.next.count > 0)
	})
	take(1) // from the third range: no request of its own
	if n := stats(t, 0).Segments.Requests + stats(t, 1).Segments.Requests; n != 3 {
		t.Errorf("%d range requests for 201 numbers, want 3 (the first range and two prefetched)", n)
	}
	checkDistinctIncreasing(t, [][]uint64{got})
}

// h. Local decode equals the server's GET /v1/ids/{id}.
func TestDecodeMatchesServer(t *testing.T) {
	c := newClient(t, Options{})
	for i := 0; i < 20; i++ {
		id, err := c.Next(bg)
		if err != nil {
			t.Fatal(err)
		}
		d, err := c.Decode(bg, id)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := plainHTTP.Get(servers(t)[0] + "/v1/ids/" + strconv.FormatUint(id, 10))
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Time   string            `json:"time"`
			UnixMs int64             `json:"unix_ms"`
			Ticks  uint64            `json:"ticks"`
			Node   uint64            `json:"node"`
			Seq    uint64            `json:"seq"`
			Fields map[string]uint64 `json:"fields"`
		}
		err = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if d.Time != s.Time || d.UnixMs != s.UnixMs || d.Ticks != s.Ticks || d.Node != s.Node || d.Seq != s.Seq ||
			len(d.Fields) != len(s.Fields) {
			t.Fatalf("ID %d: local %+v, server %+v", id, d, s)
		}
		for _, f := range d.Fields {
			if s.Fields[f.Name] != f.Value {
				t.Fatalf("ID %d field %s: local %d, server %d", id, f.Name, f.Value, s.Fields[f.Name])
			}
		}
	}
	_, err := c.DecodeString(bg, "12x")
	var fe *Error
	if !errors.As(err, &fe) || fe.Code != "INVALID_ARGUMENT" {
		t.Errorf("got %v", err)
	}
}
