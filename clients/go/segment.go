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

// OrderSource is what an order number stands for.
type OrderSource string

const (
	// SourceSnowflake: the number stands for a snowflake ID (DecodedOrder.Decoded is set).
	SourceSnowflake OrderSource = "snowflake"
	// SourceSegment: the number stands for a segment tag's number (DecodedOrder.Tag is set).
	SourceSegment OrderSource = "segment"
)

// DecodedOrder is the server's decode of an order number (GET /v1/order-numbers/{code};
// docs/clients.md, "Order numbers"). Exactly one variant is filled, by Source.
type DecodedOrder struct {
	// OrderNumber is the number as the server read it; KeyVersion the version of the key
	// that decodes it ("1").
	OrderNumber string
	KeyVersion  string
	Source      OrderSource
	// ID is the snowflake ID, or the tag's number.
	ID uint64
	// Tag is the segment tag (SourceSegment only; "" for a snowflake number).
	Tag string
	// Decoded is the ID's fields and time as Decode gives them (SourceSnowflake only; nil for
	// a segment number).
	Decoded *Decoded
}

// DecodeOrderOptions are DecodeOrderWith's options.
type DecodeOrderOptions struct {
	// Tag is the segment tag the number was made from (?tag=); "" for a snowflake number.
	Tag string
	// Token is a bearer token for this call (scope orders:decode); "" uses Options.Token.
	Token string
}

// DecodeOrder decodes an order number on the server, which holds the key; the client's Token
// needs scope orders:decode. A number that does not decode is the server's INVALID_ARGUMENT
// (400); an answer that does not fit a DecodedOrder is UNKNOWN.
func (c *Client) DecodeOrder(ctx context.Context, code string) (DecodedOrder, error) {
	return c.DecodeOrderWith(ctx, code, DecodeOrderOptions{})
}

// DecodeSegmentOrder decodes a segment tag's order number on the server (?tag=).
func (c *Client) DecodeSegmentOrder(ctx context.Context, tag, code string) (DecodedOrder, error) {
	return c.DecodeOrderWith(ctx, code, DecodeOrderOptions{Tag: tag})
}

// DecodeOrderWith is DecodeOrder with a tag and a token for this call.
func (c *Client) DecodeOrderWith(ctx context.Context, code string, opts DecodeOrderOptions) (DecodedOrder, error) {
	if c.isClosed() {
		return DecodedOrder{}, errClosed()
	}
	path := "/v1/order-numbers/" + url.PathEscape(code)
	if opts.Tag != "" {
		path += "?tag=" + url.QueryEscape(opts.Tag)
	}
	if opts.Token != "" {
		ctx = context.WithValue(ctx, tokenKey{}, "Bearer "+opts.Token)
	}
	deadline := c.callDeadline(ctx)
	dl := func() time.Duration { return deadline }
	a, err := c.do(ctx, path, nil, dl, nil)
	if err != nil {
		return DecodedOrder{}, err
	}
	o, err := readOrderAnswer(a.body)
	if err != nil {
		return DecodedOrder{}, err
	}
	if o.Source == SourceSnowflake {
		l, lerr := c.getLayout(ctx, dl, nil)
		if lerr != nil {
			return DecodedOrder{}, lerr
		}
		if err := o.decodeWith(l, a.body); err != nil {
			return DecodedOrder{}, err
		}
	}
	return o, nil
}

// tokenKey carries a per-call Authorization value in a request's context.
type tokenKey struct{}

func badOrderAnswer(why string, body []byte) *Error {
	if len(body) > 200 {
		body = body[:200]
	}
	return &Error{Code: "UNKNOWN", Message: "an order-number answer " + why + ": " + strconv.Quote(string(body))}
}

// readOrderAnswer checks a GET /v1/order-numbers/{code} answer; a snowflake number's Decoded
// is filled by decodeWith.
func readOrderAnswer(body []byte) (DecodedOrder, *Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return DecodedOrder{}, badOrderAnswer("that is not a JSON object", body)
	}
	text := func(key string) (string, bool) {
		raw, ok := fields[key]
		var v string
		if !ok || json.Unmarshal(raw, &v) != nil {
			return "", false
		}
		return v, true
	}
	var o DecodedOrder
	var ok bool
	var id, source string
	for _, f := range []struct {
		key string
		to  *string
	}{{"order_number", &o.OrderNumber}, {"key_version", &o.KeyVersion}, {"source", &source}, {"id", &id}} {
		if *f.to, ok = text(f.key); !ok {
			return DecodedOrder{}, badOrderAnswer("without "+strconv.Quote(f.key)+" as text", body)
		}
	}
	var perr error
	if o.ID, perr = parseID(id); perr != nil {
		return DecodedOrder{}, badOrderAnswer("whose id is not a decimal number below 2^64", body)
	}
	switch OrderSource(source) {
	case SourceSegment:
		if o.Tag, ok = text("tag"); !ok || o.Tag == "" {
			return DecodedOrder{}, badOrderAnswer("of a segment number without its tag", body)
		}
	case SourceSnowflake:
	default:
		return DecodedOrder{}, badOrderAnswer("whose source is neither snowflake nor segment", body)
	}
	o.Source = OrderSource(source)
	return o, nil
}

// decodeWith fills a snowflake number's Decoded from the layout, as Decode does.
func (o *DecodedOrder) decodeWith(l *Layout, body []byte) *Error {
	d, err := l.Decode(o.ID)
	if err != nil {
		return badOrderAnswer("whose id the layout cannot have made ("+err.Error()+")", body)
	}
	o.Decoded = &d
	return nil
}
