package flurry

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The shared conformance suite (clients/conformance/cases.json): FLURRY_CONFORMANCE_CASES, or
// the file beside this client's directory for unit runs.
type conformanceCases struct {
	Layouts []struct {
		Name   string          `json:"name"`
		Layout json.RawMessage `json:"layout"`
		Decode []struct {
			ID     string `json:"id"`
			Expect struct {
				Time   string  `json:"time"`
				UnixMs int64   `json:"unix_ms"`
				Ticks  uint64  `json:"ticks"`
				Node   uint64  `json:"node"`
				Seq    uint64  `json:"seq"`
				Clock  *uint64 `json:"clock"`
				Fields []struct {
					Name  string `json:"name"`
					Value uint64 `json:"value"`
				} `json:"fields"`
			} `json:"expect"`
		} `json:"decode"`
		DecodeErrors []string `json:"decode_errors"`
	} `json:"layouts"`
	Errors []struct {
		Name             string  `json:"name"`
		Status           int     `json:"status"`
		RetryAfterHeader *string `json:"retry_after_header"`
		Body             *string `json:"body"`
		Expect           struct {
			Code          string   `json:"code"`
			Reason        string   `json:"reason"`
			Message       *string  `json:"message"`
			MessagePrefix *string  `json:"message_prefix"`
			RetryAfter    *float64 `json:"retry_after"`
			Action        string   `json:"action"`
		} `json:"expect"`
	} `json:"errors"`
	RetryWaits []struct {
		Round      int      `json:"round"`
		RetryAfter *float64 `json:"retry_after"`
		U          float64  `json:"u"`
		Wait       float64  `json:"wait"`
	} `json:"retry_waits"`
	BatchSizes []struct {
		MinBatch       int      `json:"min_batch"`
		MaxBatch       int      `json:"max_batch"`
		ServerMaxBatch int      `json:"server_max_batch"`
		Events         []string `json:"events"`
		Expect         []int    `json:"expect"`
	} `json:"batch_sizes"`
	TSO struct {
		Grants []struct {
			Name   string `json:"name"`
			Body   string `json:"body"`
			Count  uint64 `json:"count"`
			Expect struct {
				First *string `json:"first"`
				Code  string  `json:"code"`
			} `json:"expect"`
		} `json:"grants"`
		Leaders []struct {
			Location string  `json:"location"`
			Leader   *string `json:"leader"`
		} `json:"leaders"`
	} `json:"tso"`
	OrderDecodes []struct {
		Name   string `json:"name"`
		Layout string `json:"layout"`
		Answer string `json:"answer"`
		Expect *struct {
			OrderNumber string  `json:"order_number"`
			KeyVersion  string  `json:"key_version"`
			Source      string  `json:"source"`
			ID          string  `json:"id"`
			Tag         *string `json:"tag"`
			Decoded     *struct {
				Time   string `json:"time"`
				UnixMs int64  `json:"unix_ms"`
				Ticks  uint64 `json:"ticks"`
				Node   uint64 `json:"node"`
				Seq    uint64 `json:"seq"`
				Fields []struct {
					Name  string `json:"name"`
					Value uint64 `json:"value"`
				} `json:"fields"`
			} `json:"decoded"`
		} `json:"expect"`
		ExpectError string `json:"expect_error"`
	} `json:"order_decodes"`
}

func loadCases(t *testing.T) *conformanceCases {
	t.Helper()
	path := os.Getenv("FLURRY_CONFORMANCE_CASES")
	if path == "" {
		path = filepath.Join("..", "conformance", "cases.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("conformance cases: %v", err)
	}
	var cases conformanceCases
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("conformance cases %s: %v", path, err)
	}
	if len(cases.Layouts) == 0 || len(cases.Errors) == 0 || len(cases.RetryWaits) == 0 || len(cases.BatchSizes) == 0 {
		t.Fatalf("conformance cases %s: a section is empty", path)
	}
	return &cases
}

func TestConformanceDecode(t *testing.T) {
	cases := loadCases(t)
	vectors := 0
	for _, lc := range cases.Layouts {
		layout, err := ParseLayout(lc.Layout)
		if err != nil {
			t.Fatalf("%s: %v", lc.Name, err)
		}
		for _, v := range lc.Decode {
			d, err := layout.DecodeString(v.ID)
			if err != nil {
				t.Errorf("%s %s: %v", lc.Name, v.ID, err)
				continue
			}
			e := v.Expect
			if d.Time != e.Time || d.UnixMs != e.UnixMs || d.Ticks != e.Ticks || d.Node != e.Node || d.Seq != e.Seq {
				t.Errorf("%s %s: got time %s unix_ms %d ticks %d node %d seq %d, want %+v",
					lc.Name, v.ID, d.Time, d.UnixMs, d.Ticks, d.Node, d.Seq, e)
			}
			if d.HasClock != (e.Clock != nil) || (e.Clock != nil && d.Clock != *e.Clock) {
				t.Errorf("%s %s: clock %v/%d, want %v", lc.Name, v.ID, d.HasClock, d.Clock, e.Clock)
			}
			if len(d.Fields) != len(e.Fields) {
				t.Errorf("%s %s: %d fields, want %d", lc.Name, v.ID, len(d.Fields), len(e.Fields))
				continue
			}
			for i, f := range e.Fields {
				if d.Fields[i].Name != f.Name || d.Fields[i].Value != f.Value {
					t.Errorf("%s %s: field %d is %+v, want %+v", lc.Name, v.ID, i, d.Fields[i], f)
				}
			}
			vectors++
		}
		for _, text := range lc.DecodeErrors {
			_, err := layout.DecodeString(text)
			var fe *Error
			if !errors.As(err, &fe) || fe.Code != "INVALID_ARGUMENT" {
				t.Errorf("%s %q: got %v, want INVALID_ARGUMENT", lc.Name, text, err)
			}
		}
	}
	if vectors < 50 {
		t.Fatalf("only %d decode vectors", vectors)
	}
}

// Order-number answers become a DecodedOrder: the snowflake variant with the ID decoded as
// Decode does, the segment variant with its tag; an answer that does not fit is UNKNOWN.
func TestConformanceOrderDecodes(t *testing.T) {
	cases := loadCases(t)
	layouts := map[string]*Layout{}
	for _, lc := range cases.Layouts {
		l, err := ParseLayout(lc.Layout)
		if err != nil {
			t.Fatal(err)
		}
		layouts[lc.Name] = l
	}
	sources := map[OrderSource]bool{}
	bad := 0
	for _, c := range cases.OrderDecodes {
		l := layouts[c.Layout]
		o, err := readOrderAnswer([]byte(c.Answer))
		if err == nil && o.Source == SourceSnowflake {
			err = o.decodeWith(l, []byte(c.Answer))
		}
		if c.ExpectError != "" {
			if err == nil || err.Code != c.ExpectError {
				t.Errorf("%s: got %+v, %v; want %s", c.Name, o, err, c.ExpectError)
			}
			bad++
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		x := c.Expect
		id, _ := strconv.ParseUint(x.ID, 10, 64)
		if o.OrderNumber != x.OrderNumber || o.KeyVersion != x.KeyVersion || string(o.Source) != x.Source || o.ID != id {
			t.Errorf("%s: got %+v, want %+v", c.Name, o, x)
		}
		if (x.Tag == nil) != (o.Tag == "") || (x.Tag != nil && *x.Tag != o.Tag) {
			t.Errorf("%s: tag %q, want %v", c.Name, o.Tag, x.Tag)
		}
		if (x.Decoded == nil) != (o.Decoded == nil) {
			t.Errorf("%s: decoded %+v, want %+v", c.Name, o.Decoded, x.Decoded)
			continue
		}
		if d, e := o.Decoded, x.Decoded; d != nil {
			want, _ := l.Decode(id)
			if d.ID != id || d.Time != e.Time || d.UnixMs != e.UnixMs || d.Ticks != e.Ticks || d.Node != e.Node ||
				d.Seq != e.Seq || len(d.Fields) != len(e.Fields) || d.TimeNs != want.TimeNs {
				t.Errorf("%s: decoded %+v, want %+v", c.Name, d, e)
				continue
			}
			for i, f := range e.Fields {
				if d.Fields[i].Name != f.Name || d.Fields[i].Value != f.Value {
					t.Errorf("%s: field %d is %+v, want %+v", c.Name, i, d.Fields[i], f)
				}
			}
		}
		sources[o.Source] = true
	}
	if !sources[SourceSnowflake] || !sources[SourceSegment] || bad < 10 {
		t.Fatalf("order_decodes: sources %v, %d bad answers", sources, bad)
	}
}

func TestConformanceErrors(t *testing.T) {
	for _, ec := range loadCases(t).Errors {
		var e *Error
		var act action
		if ec.Status == 0 {
			e = connectionError("http://127.0.0.1:1", errors.New("connection refused"))
			act = classify(0, false)
		} else {
			ra := ""
			if ec.RetryAfterHeader != nil {
				ra = *ec.RetryAfterHeader
			}
			body := ""
			if ec.Body != nil {
				body = *ec.Body
			}
			e = errorFromAnswer("http://127.0.0.1:1", ec.Status, ra, ec.RetryAfterHeader != nil, []byte(body))
			act = classify(ec.Status, ec.RetryAfterHeader != nil)
		}
		x := ec.Expect
		if e.Code != x.Code || e.Reason != x.Reason || act.String() != x.Action || e.HTTPStatus != ec.Status {
			t.Errorf("%s: got %s/%s/%s status %d, want %s/%s/%s", ec.Name, e.Code, e.Reason, act, e.HTTPStatus,
				x.Code, x.Reason, x.Action)
		}
		if x.Message != nil && e.Message != *x.Message {
			t.Errorf("%s: message %q, want %q", ec.Name, e.Message, *x.Message)
		}
		if x.MessagePrefix != nil && (len(e.Message) < len(*x.MessagePrefix) || e.Message[:len(*x.MessagePrefix)] != *x.MessagePrefix) {
			t.Errorf("%s: message %q, want prefix %q", ec.Name, e.Message, *x.MessagePrefix)
		}
		if (x.RetryAfter != nil) != e.HasRetryAfter ||
			(x.RetryAfter != nil && e.RetryAfter != time.Duration(*x.RetryAfter*float64(time.Second))) {
			t.Errorf("%s: retry after %v/%v, want %v", ec.Name, e.HasRetryAfter, e.RetryAfter, x.RetryAfter)
		}
		if e.Endpoint != "http://127.0.0.1:1" {
			t.Errorf("%s: endpoint %q", ec.Name, e.Endpoint)
		}
	}
}

func TestConformanceRetryWaits(t *testing.T) {
	for _, rc := range loadCases(t).RetryWaits {
		var ra time.Duration
		if rc.RetryAfter != nil {
			ra = time.Duration(*rc.RetryAfter * float64(time.Second))
		}
		got := retryWait(rc.Round, ra, rc.U).Seconds()
		if math.Abs(got-rc.Wait) > 1e-9 {
			t.Errorf("round %d retry_after %v u %v: wait %v, want %v", rc.Round, rc.RetryAfter, rc.U, got, rc.Wait)
		}
	}
}

func TestConformanceTSO(t *testing.T) {
	c := loadCases(t)
	for _, g := range c.TSO.Grants {
		first, err := parseTSO([]byte(g.Body), g.Count, "e")
		if g.Expect.First != nil {
			if err != nil || strconv.FormatUint(first, 10) != *g.Expect.First {
				t.Errorf("%s: got %d, %v; want %s", g.Name, first, err, *g.Expect.First)
			}
		} else if err == nil || err.Code != g.Expect.Code {
			t.Errorf("%s: got %d, %v; want code %s", g.Name, first, err, g.Expect.Code)
		}
	}
	for _, l := range c.TSO.Leaders {
		want := ""
		if l.Leader != nil {
			want = *l.Leader
		}
		if got := leaderBase(l.Location); got != want {
			t.Errorf("Location %q: leader %q, want %q", l.Location, got, want)
		}
	}
}

func TestConformanceBatchSizes(t *testing.T) {
	events := map[string]batchEvent{"first": eventFirst, "low": eventLow, "expired": eventExpired}
	for i, bc := range loadCases(t).BatchSizes {
		size := 0
		for j, name := range bc.Events {
			ev, ok := events[name]
			if !ok {
				t.Fatalf("sequence %d: unknown event %q", i, name)
			}
			size = nextBatchSize(size, ev, bc.MinBatch, bc.MaxBatch, bc.ServerMaxBatch)
			if size != bc.Expect[j] {
				t.Errorf("sequence %d step %d (%s): batch %d, want %d", i, j, name, size, bc.Expect[j])
			}
		}
	}
}

func TestParseIDLines(t *testing.T) {
	ids, err := parseIDLines([]byte("1\n18446744073709551615\n42\n"), 3)
	if err != nil || len(ids) != 3 || ids[1] != math.MaxUint64 || ids[2] != 42 {
		t.Fatalf("got %v %v", ids, err)
	}
	// Lines of one width take the eight-digits-at-a-time path; compare with strconv.
	r := rand.New(rand.NewSource(1))
	var text []byte
	var want []uint64
	for i := 0; i < 20000; i++ {
		v := r.Uint64() >> uint(r.Intn(64))
		if i%3 == 0 {
			v = 251753601578303488 + uint64(i)
		}
		want = append(want, v)
		text = strconv.AppendUint(text, v, 10)
		text = append(text, '\n')
	}
	got, err := parseIDLines(text, len(want))
	if err != nil || len(got) != len(want) {
		t.Fatalf("%d IDs, %v", len(got), err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d: %d, want %d", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"1\nx\n", "18446744073709551616\n", "{\"ids\":[]}",
		"1234567890123456789\n12345678:0123456789\n", "1234567890123456789\n123456789012345/789\n"} {
		if _, err := parseIDLines([]byte(bad), 1); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
