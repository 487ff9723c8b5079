package flurry

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"
)

// tsoMaxRedirects is how many redirects one TSO request follows before it gives up with the
// last answer's error (a leader change in the middle of a call takes one or two).
const tsoMaxRedirects = 4

// tsoWaiter is one TSO caller: queued until a request takes it, then given its value or error
// (done is closed then).
type tsoWaiter struct {
	taken bool // guarded by Client.tsoMu
	value uint64
	err   *Error
	done  chan struct{}
}

// TSO returns a timestamp from the cluster's timestamp oracle (GET /v1/tso), strictly greater
// than every timestamp any client got before this call began. Concurrent callers share one
// request in flight; a caller that arrives while one is in flight waits for the next request,
// which carries every caller waiting then (at most MaxBatch of them). Nothing is prefetched
// or kept between calls (that would break the guarantee). A follower's 307 is followed to the
// leader, which later calls ask directly until it fails (a connection error or a 502, 503 or
// 504), when they go back to the endpoints. Waits until ctx's deadline or Timeout, whichever
// is sooner; errors are *Error (NOT_FOUND with reason TSO_OFF when the server does not serve
// the oracle). Safe for concurrent use.
func (c *Client) TSO(ctx context.Context) (uint64, error) {
	if c.isClosed() {
		return 0, errClosed()
	}
	deadline := c.callDeadline(ctx)
	w := &tsoWaiter{done: make(chan struct{})}
	c.tsoMu.Lock()
	c.tsoQueue = append(c.tsoQueue, w)
	if !c.tsoBusy {
		c.tsoBusy = true
		go c.tsoRun()
	}
	c.tsoMu.Unlock()
	timer := time.NewTimer(deadline - c.mono())
	defer timer.Stop()
	var err *Error
	select {
	case <-w.done:
		if w.err != nil {
			return 0, w.err
		}
		return w.value, nil
	case <-timer.C:
		err = &Error{Code: "DEADLINE_EXCEEDED", Message: "no timestamp within the deadline: the tso request in flight has not answered"}
	case <-ctx.Done():
		if err = c.contextError(ctx); err == nil {
			err = &Error{Code: "DEADLINE_EXCEEDED", Message: "no timestamp within the deadline: " + ctx.Err().Error()}
		}
	case <-c.lifetime.Done():
		err = errClosed()
	}
	c.tsoMu.Lock()
	if !w.taken { // a value granted for it later would be skipped, never reused
		for i, q := range c.tsoQueue {
			if q == w {
				c.tsoQueue = append(c.tsoQueue[:i], c.tsoQueue[i+1:]...)
				break
			}
		}
	}
	c.tsoMu.Unlock()
	return 0, err
}

// tsoRun sends the queued callers' requests, one at a time and each for at most MaxBatch
// callers, until none is queued.
func (c *Client) tsoRun() {
	for {
		c.tsoMu.Lock()
		n := len(c.tsoQueue)
		if n == 0 || c.isClosed() {
			c.tsoBusy = false
			c.tsoMu.Unlock()
			return
		}
		if n > c.opts.MaxBatch {
			n = c.opts.MaxBatch
		}
		batch := append([]*tsoWaiter(nil), c.tsoQueue[:n]...)
		c.tsoQueue = append(c.tsoQueue[:0], c.tsoQueue[n:]...)
		for _, w := range batch {
			w.taken = true
		}
		c.tsoMu.Unlock()
		first, err := c.tsoFetch(uint64(n), c.mono()+c.opts.Timeout)
		for k, w := range batch {
			w.value, w.err = first+uint64(k), err
			close(w.done)
		}
	}
}

// tsoFetch asks for count timestamps: from the leader last seen, else from the endpoints (with
// the contract's retries), following redirects to the leader. A leader that failed in this call
// is asked again only after the wait between retry rounds (the other servers may redirect to it
// until its lease has run out), until the deadline. Only tsoRun calls it (one at a time), so
// tsoLeader needs no lock.
func (c *Client) tsoFetch(count uint64, deadline time.Duration) (uint64, *Error) {
	ctx := c.lifetime
	path := "/v1/tso?count=" + strconv.FormatUint(count, 10)
	dl := func() time.Duration { return deadline }
	var last *Error
	failed := map[string]*Error{} // leaders that failed in this call, with the error
	hops, rounds := 0, 0
	for {
		leader := c.tsoLeader
		if leader == "" {
			a, err := c.doFollow(ctx, path, nil, dl, nil, true)
			if err != nil {
				return 0, err
			}
			if a.location == "" {
				c.tsoLeader = a.served // the HTTP client followed a redirect itself
				return parseTSO(a.body, count, c.endpoints[c.preferred.Load()])
			}
			last = a.redirect
			if leader = leaderBase(a.location); leader == "" {
				return 0, a.redirect // a redirect to nowhere we can go: the answer as it came
			}
			if ferr, ok := failed[leader]; ok {
				wait := retryWait(rounds, 0, c.random())
				rounds++
				if c.mono()+wait > deadline {
					return 0, ferr
				}
				if err := c.sleep(ctx, wait); err != nil {
					return 0, errClosed()
				}
			} else if hops++; hops > tsoMaxRedirects {
				return 0, last
			}
			c.tsoLeader = leader
			continue
		}
		if c.mono() >= deadline {
			return 0, c.deadlineError(last)
		}
		status, ra, hasRA, body, location, served, err := c.attempt(ctx, leader, path, nil, deadline)
		if err != nil {
			if cerr := c.contextError(ctx); cerr != nil {
				return 0, cerr
			}
			last = connectionError(leader, err)
			failed[leader] = last
			c.tsoLeader = "" // back to the endpoints
			continue
		}
		if c.isClosed() {
			return 0, errClosed()
		}
		if status >= 200 && status < 300 {
			if served != "" {
				c.tsoLeader = served
			}
			return parseTSO(body, count, leader)
		}
		last = errorFromAnswer(leader, status, ra, hasRA, body)
		switch {
		case status == 307 && location != "":
			if hops++; hops > tsoMaxRedirects {
				return 0, last
			}
			if c.tsoLeader = leaderBase(location); c.tsoLeader == "" {
				return 0, last
			}
		case status == 502 || status == 503 || status == 504:
			failed[leader] = last
			c.tsoLeader = ""
		default:
			return 0, last
		}
	}
}

// leaderBase is the scheme://host:port of a 307's Location, "" when it is not an absolute
// http:// or https:// URL.
func leaderBase(location string) string {
	u, err := url.Parse(location)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// parseTSO reads {"first":"<decimal>","count":N}: the first timestamp; UNKNOWN quoting an
// answer that does not fit a request for count.
func parseTSO(body []byte, count uint64, endpoint string) (uint64, *Error) {
	var j struct {
		First string `json:"first"`
		Count uint64 `json:"count"`
	}
	if json.Unmarshal(body, &j) == nil && j.Count == count && j.First != "" && j.First[0] != '+' {
		if first, err := strconv.ParseUint(j.First, 10, 64); err == nil && first+count-1 >= first {
			return first, nil
		}
	}
	start := body
	if len(start) > 200 {
		start = start[:200]
	}
	return 0, &Error{Code: "UNKNOWN", Endpoint: endpoint,
		Message: "a tso answer that does not fit a request for " + strconv.FormatUint(count, 10) + ": " + strconv.Quote(string(start))}
}
