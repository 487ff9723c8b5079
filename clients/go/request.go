package flurry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"net"
	"net/http"
	"sync"
	"time"
)

func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil, // the endpoints are the servers: never an environment proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     50 * time.Second,
		DisableCompression:  true,
		ReadBufferSize:      64 << 10, // a refill's answer is ~300 KB: fewer reads
		ForceAttemptHTTP2:   false,
	}
}

func defaultSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lockedRandom is a jitter source safe for concurrent use.
func lockedRandom() func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

// answer is a 2xx response's body and when its request was sent (monotonic). served is the
// base URL of the server that answered when the HTTP client followed a redirect to another
// ("" otherwise); with follow, location is a 307's Location (body empty) and redirect the
// typed error of that answer.
type answer struct {
	body     []byte
	sentAt   time.Duration
	served   string
	location string
	redirect *Error
}

// maxBody bounds what the client reads of one response (1,000,000 IDs as text is about 20 MB).
const maxBody = 64 << 20

// attempt sends one GET to one endpoint; status 0 with err for a connection error. location is
// the answer's Location; served the base URL of the server that answered when the HTTP client
// followed a redirect to another host ("" otherwise).
func (c *Client) attempt(ctx context.Context, endpoint, pathQuery string, into *bytes.Buffer, deadline time.Duration) (
	status int, retryAfter string, hasRetryAfter bool, body []byte, location, served string, err error) {
	actx, cancel := context.WithDeadline(ctx, c.wall(deadline))
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, endpoint+pathQuery, nil)
	if err != nil {
		return 0, "", false, nil, "", "", err
	}
	if auth, ok := ctx.Value(tokenKey{}).(string); ok {
		req.Header.Set("Authorization", auth)
	} else if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", false, nil, "", "", err
	}
	if into != nil {
		into.Reset()
		_, err = into.ReadFrom(io.LimitReader(resp.Body, maxBody))
		body = into.Bytes()
	} else {
		body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	}
	resp.Body.Close()
	if err != nil {
		return 0, "", false, nil, "", "", err
	}
	if v, ok := resp.Header["Retry-After"]; ok && len(v) > 0 {
		retryAfter, hasRetryAfter = v[0], true
	}
	if u := resp.Request.URL; u.Host != req.URL.Host || u.Scheme != req.URL.Scheme {
		served = u.Scheme + "://" + u.Host
	}
	return resp.StatusCode, retryAfter, hasRetryAfter, body, resp.Header.Get("Location"), served, nil
}

// do sends GET pathQuery with the contract's retries and failover (docs/clients.md, "Errors
// and retries") until deadline() (monotonic; it may move later while do runs, as callers join
// a refill). A 2xx body is read into into when given (reused by refills), else a new slice.
// onWait, if set, hears of every wait between rounds before it starts.
func (c *Client) do(ctx context.Context, pathQuery string, into *bytes.Buffer, deadline func() time.Duration,
	onWait func(last *Error, retryAt time.Duration)) (answer, *Error) {
	return c.doFollow(ctx, pathQuery, into, deadline, onWait, false)
}

// doFollow is do; with follow, a 307 with a Location ends it with that answer (TSO goes to the
// leader) instead of as a fatal error.
func (c *Client) doFollow(ctx context.Context, pathQuery string, into *bytes.Buffer, deadline func() time.Duration,
	onWait func(last *Error, retryAt time.Duration), follow bool) (answer, *Error) {
	if ctx != c.lifetime { // Close ends a caller's request and its waits too, at once
		var stop func()
		ctx, stop = c.untilClosed(ctx)
		defer stop()
	}
	n := len(c.endpoints)
	excluded := make([]bool, n)
	left := n
	start := int(c.preferred.Load())
	var last *Error
	for round := 0; ; round++ {
		var roundRetryAfter time.Duration
		for k := 0; k < n; k++ {
			ep := (start + k) % n
			if excluded[ep] {
				continue
			}
			if c.mono() >= deadline() {
				return answer{}, c.deadlineError(last)
			}
			sentAt := c.mono()
			status, ra, hasRA, body, location, served, err := c.attempt(ctx, c.endpoints[ep], pathQuery, into, deadline())
			if err != nil {
				if cerr := c.contextError(ctx); cerr != nil {
					return answer{}, cerr
				}
				if c.mono() >= deadline() && errors.Is(err, context.DeadlineExceeded) {
					return answer{}, c.deadlineError(last)
				}
				last = connectionError(c.endpoints[ep], err)
				continue
			}
			if c.lifetime.Err() != nil {
				return answer{}, errClosed() // what came back is dropped, never handed out
			}
			if status >= 200 && status < 300 {
				c.preferred.Store(int32(ep))
				return answer{body: body, sentAt: sentAt, served: served}, nil
			}
			e := errorFromAnswer(c.endpoints[ep], status, ra, hasRA, body)
			last = e
			if follow && status == http.StatusTemporaryRedirect && location != "" {
				c.preferred.Store(int32(ep))
				return answer{sentAt: sentAt, location: location, redirect: e}, nil
			}
			switch classify(status, hasRA) {
			case actionFatal:
				c.preferred.Store(int32(ep))
				return answer{}, e
			case actionFailover:
				excluded[ep] = true
				left--
			case actionRetry:
				if e.RetryAfter > roundRetryAfter {
					roundRetryAfter = e.RetryAfter
				}
			}
		}
		if left == 0 {
			return answer{}, last
		}
		wait := retryWait(round, roundRetryAfter, c.random())
		retryAt := c.mono() + wait
		if retryAt > deadline() {
			return answer{}, last // the server said why; a timeout would hide it
		}
		if onWait != nil {
			onWait(last, retryAt)
		}
		if err := c.sleep(ctx, wait); err != nil {
			if cerr := c.contextError(ctx); cerr != nil {
				return answer{}, cerr
			}
			return answer{}, last
		}
	}
}

func (c *Client) deadlineError(last *Error) *Error {
	if last != nil && last.HTTPStatus != 0 {
		return last
	}
	e := &Error{Code: "DEADLINE_EXCEEDED", Message: "the call's deadline ran out before any server answered"}
	if last != nil {
		e.Message += " (last: " + last.Message + ")"
		e.Endpoint = last.Endpoint
	}
	return e
}

// contextError is the error for a cancelled caller or a closed client, nil otherwise.
func (c *Client) contextError(ctx context.Context) *Error {
	if c.lifetime.Err() != nil {
		return errClosed()
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: "CANCELLED", Message: err.Error()}
	}
	return nil
}

// untilClosed is ctx, also cancelled when the client is closed; stop releases it.
func (c *Client) untilClosed(ctx context.Context) (context.Context, func()) {
	merged, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-c.lifetime.Done():
			cancel()
		case <-merged.Done():
		}
	}()
	return merged, cancel
}

func errClosed() *Error {
	return &Error{Code: "CANCELLED", Message: "the client is closed"}
}

// flight is one request in flight (a refill or a segment range fetch) that callers wait on.
type flight struct {
	done chan struct{} // closed when finished; err is then final
	err  *Error

	mu       sync.Mutex
	deadline time.Duration // the latest deadline of the callers waiting (monotonic)
	last     *Error        // the error of the last failed round, while waiting to retry
	retryAt  time.Duration
	progress chan struct{} // closed (and replaced) when last/retryAt change
}

func newFlight(deadline time.Duration) *flight {
	return &flight{done: make(chan struct{}), deadline: deadline, progress: make(chan struct{})}
}

func (f *flight) extend(deadline time.Duration) {
	f.mu.Lock()
	if deadline > f.deadline {
		f.deadline = deadline
	}
	f.mu.Unlock()
}

func (f *flight) currentDeadline() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deadline
}

func (f *flight) waiting(last *Error, retryAt time.Duration) {
	f.mu.Lock()
	f.last, f.retryAt = last, retryAt
	close(f.progress)
	f.progress = make(chan struct{})
	f.mu.Unlock()
}

// finish records the outcome; the caller closes nothing else.
func (f *flight) finish(err *Error) {
	f.err = err
	close(f.done)
}

// wait blocks until the flight ends or the caller's deadline: nil when it succeeded, its
// error when it failed, or (once the flight's next retry would come after the caller's
// deadline) the error of its last round at once.
func (c *Client) waitFlight(ctx context.Context, f *flight, deadline time.Duration) *Error {
	for {
		f.mu.Lock()
		last, retryAt, progress := f.last, f.retryAt, f.progress
		f.mu.Unlock()
		if last != nil && retryAt > deadline {
			return last
		}
		remaining := deadline - c.mono()
		if remaining <= 0 {
			return c.deadlineError(last)
		}
		timer := time.NewTimer(remaining)
		select {
		case <-f.done:
			timer.Stop()
			return f.err
		case <-progress:
			timer.Stop()
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			if cerr := c.contextError(ctx); cerr != nil {
				return cerr
			}
			return c.deadlineError(last)
		case <-c.lifetime.Done():
			timer.Stop()
			return errClosed()
		}
	}
}
