package flurry

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Segment hands out one segment tag's numbers from ranges the client holds (a double buffer:
// the next range is fetched in the background once SegmentPrefetch of the current one is
// used). Numbers come out once each and in order. Safe for concurrent use.
type Segment struct {
	c    *Client
	tag  string
	path string

	mu    sync.Mutex
	cur   segmentRange
	next  segmentRange // fetched ahead; valid when next.count > 0
	fetch *flight      // the one range request in flight for this tag, nil when none
}

// segmentRange is start, start + delta, ... (count numbers); taken of them are handed out.
type segmentRange struct {
	start, delta, count, taken, prefetchAt uint64
}

// Segment returns the handle of tag (the same one for the same tag). It sends nothing yet.
func (c *Client) Segment(tag string) *Segment {
	c.segmentsMu.Lock()
	defer c.segmentsMu.Unlock()
	s := c.segments[tag]
	if s == nil {
		s = &Segment{c: c, tag: tag, path: "/v1/segments/" + url.PathEscape(tag) + "/range?size=" +
			strconv.Itoa(c.opts.SegmentRange)}
		c.segments[tag] = s
	}
	return s
}

// Tag is the segment's tag.
func (s *Segment) Tag() string { return s.tag }

// Next returns the tag's next number, waiting for the range request in flight when the held
// ranges are used up (until ctx's deadline or Timeout, whichever is sooner). A tag that does
// not exist is NOT_FOUND, a SegmentRange larger than the tag's range OUT_OF_RANGE; neither is
// retried.
func (s *Segment) Next(ctx context.Context) (uint64, error) {
	c := s.c
	var deadline time.Duration
	s.mu.Lock()
	for {
		if c.isClosed() {
			s.mu.Unlock()
			return 0, errClosed()
		}
		if r := &s.cur; r.taken < r.count {
			v := r.start + r.taken*r.delta
			r.taken++
			if r.taken == r.prefetchAt && s.next.count == 0 && s.fetch == nil {
				s.startFetchLocked(c.mono() + c.opts.Timeout)
			}
			s.mu.Unlock()
			return v, nil
		}
		if s.next.count > 0 {
			s.cur, s.next = s.next, segmentRange{}
			continue
		}
		if deadline == 0 {
			deadline = c.callDeadline(ctx)
		}
		f := s.fetch
		if f == nil {
			f = s.startFetchLocked(deadline)
		}
		f.extend(deadline)
		s.mu.Unlock()
		if err := c.waitFlight(ctx, f, deadline); err != nil {
			return 0, err
		}
		s.mu.Lock()
	}
}

func (s *Segment) startFetchLocked(deadline time.Duration) *flight {
	f := newFlight(deadline)
	s.fetch = f
	go s.runFetch(f)
	return f
}

func (s *Segment) runFetch(f *flight) {
	r, err := s.fetchRange(f)
	s.mu.Lock()
	s.fetch = nil
	if err == nil && r.count > 0 {
		if s.cur.taken >= s.cur.count {
			s.cur = r
		} else {
			s.next = r
		}
	}
	f.finish(err)
	s.mu.Unlock()
}

func (s *Segment) fetchRange(f *flight) (segmentRange, *Error) {
	c := s.c
	a, err := c.do(c.lifetime, s.path, nil, f.currentDeadline, f.waiting)
	if err != nil {
		return segmentRange{}, err
	}
	var body struct {
		Start string `json:"start"`
		End   string `json:"end"`
		Delta uint64 `json:"delta"`
	}
	if jerr := json.Unmarshal(a.body, &body); jerr != nil {
		return segmentRange{}, &Error{Code: "UNKNOWN", Message: "a range answer that is not JSON: " + jerr.Error()}
	}
	start, err1 := strconv.ParseUint(body.Start, 10, 64)
	end, err2 := strconv.ParseUint(body.End, 10, 64)
	if err1 != nil || err2 != nil || body.Delta == 0 || end < start {
		return segmentRange{}, &Error{Code: "UNKNOWN", Message: "a range answer without start, end and delta: " +
			strconv.Quote(string(a.body))}
	}
	r := segmentRange{start: start, delta: body.Delta, count: (end - start + body.Delta - 1) / body.Delta}
	r.prefetchAt = uint64(c.opts.SegmentPrefetch*float64(r.count) + 0.999999)
	if r.prefetchAt < 1 {
		r.prefetchAt = 1
	}
	if r.prefetchAt > r.count {
		r.prefetchAt = r.count
	}
	return r, nil
}

// OrderNumber is the server's decode of an order number (GET /v1/order-numbers/{code}).
type OrderNumber struct {
	OrderNumber string `json:"order_number"`
	KeyVersion  string `json:"key_version"`
	Source      string `json:"source"` // snowflake or segment
	Tag         string `json:"tag"`    // for a segment number
	ID          string `json:"id"`
	// Raw is the whole answer, with the ID's fields for a snowflake number.
	Raw json.RawMessage `json:"-"`
}

// DecodeOrder decodes an order number on the server, which holds the key; the client's Token
// needs scope orders:decode.
func (c *Client) DecodeOrder(ctx context.Context, code string) (OrderNumber, error) {
	return c.decodeOrder(ctx, "/v1/order-numbers/"+url.PathEscape(code))
}

// DecodeSegmentOrder decodes a segment tag's order number on the server (?tag=).
func (c *Client) DecodeSegmentOrder(ctx context.Context, tag, code string) (OrderNumber, error) {
	return c.decodeOrder(ctx, "/v1/order-numbers/"+url.PathEscape(code)+"?tag="+url.QueryEscape(tag))
}

func (c *Client) decodeOrder(ctx context.Context, path string) (OrderNumber, error) {
	deadline := c.callDeadline(ctx)
	a, err := c.do(ctx, path, nil, func() time.Duration { return deadline }, nil)
	if err != nil {
		return OrderNumber{}, err
	}
	var o OrderNumber
	if jerr := json.Unmarshal(a.body, &o); jerr != nil {
		return OrderNumber{}, &Error{Code: "UNKNOWN", Message: "an order-number answer that is not JSON: " + jerr.Error()}
	}
	o.Raw = a.body
	return o, nil
}
