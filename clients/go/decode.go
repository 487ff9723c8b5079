package flurry

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// LayoutField is one field of a layout, as /v1/layout lists it.
type LayoutField struct {
	Name  string `json:"name"`
	Bits  uint   `json:"bits"`
	Shift uint   `json:"shift"`
	Kind  string `json:"kind"` // time, node, seq or clock
}

// Layout is a server's ID layout, as GET /v1/layout answers it (the parts decode needs).
type Layout struct {
	Text        string        `json:"text"`
	Bits        uint          `json:"bits"`
	Fields      []LayoutField `json:"fields"`
	EpochUnixMs int64         `json:"epoch_unix_ms"`
	UnitNs      uint64        `json:"unit_ns"`
	MaxBatch    int           `json:"max_batch"`
}

// ParseLayout reads a /v1/layout answer.
func ParseLayout(body []byte) (*Layout, error) {
	var l Layout
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("flurry: /v1/layout: %w", err)
	}
	if l.Bits == 0 || l.Bits > 64 || len(l.Fields) == 0 || l.UnitNs == 0 || l.MaxBatch <= 0 {
		return nil, fmt.Errorf("flurry: /v1/layout: incomplete layout %q", body)
	}
	return &l, nil
}

// Field is one field of a decoded ID.
type Field struct {
	Name  string
	Value uint64
}

// Decoded is an ID's fields and time, exactly as the server's GET /v1/ids/{id} gives them.
type Decoded struct {
	ID uint64
	// TimeNs is the ID's time in nanoseconds since the Unix epoch, saturated at 2^63 − 1.
	TimeNs int64
	// Time is TimeNs as ISO-8601 text in UTC with milliseconds (2026-11-26T16:58:55.972Z).
	Time string
	// UnixMs is the time in whole milliseconds, rounded down.
	UnixMs int64
	Ticks  uint64
	// Node is the node fields together, the first one most significant.
	Node uint64
	Seq  uint64
	// Clock is the clock field; valid only when HasClock (layouts with a clock field).
	Clock    uint64
	HasClock bool
	// Fields holds every field of the layout, in the layout's order.
	Fields []Field
}

// Decode decodes id locally; an ID with bits set at or above the layout's bits is refused
// with INVALID_ARGUMENT, as the server refuses it.
func (l *Layout) Decode(id uint64) (Decoded, error) {
	if l.Bits < 64 && id>>l.Bits != 0 {
		return Decoded{}, invalidArgument("ID %d has bits above the layout's %d", id, l.Bits)
	}
	d := Decoded{ID: id, Fields: make([]Field, 0, len(l.Fields))}
	for _, f := range l.Fields {
		v := (id >> f.Shift) & (1<<f.Bits - 1)
		d.Fields = append(d.Fields, Field{Name: f.Name, Value: v})
		switch f.Kind {
		case "time":
			d.Ticks = v
		case "node":
			d.Node = d.Node<<f.Bits | v
		case "seq":
			d.Seq = v
		case "clock":
			d.Clock, d.HasClock = v, true
		}
	}
	d.TimeNs = timeNs(l.EpochUnixMs, d.Ticks, l.UnitNs)
	d.UnixMs = floorDiv(d.TimeNs, int64(time.Millisecond))
	d.Time = time.Unix(0, d.TimeNs).UTC().Format("2006-01-02T15:04:05.000Z")
	return d, nil
}

// DecodeString decodes an ID given as text: plain decimal digits of a number below 2^64.
func (l *Layout) DecodeString(text string) (Decoded, error) {
	id, err := parseID(text)
	if err != nil {
		return Decoded{}, err
	}
	return l.Decode(id)
}

func parseID(text string) (uint64, error) {
	if text == "" {
		return 0, invalidArgument("empty ID")
	}
	for i := 0; i < len(text); i++ {
		if text[i] < '0' || text[i] > '9' {
			return 0, invalidArgument("ID %q is not plain decimal digits", text)
		}
	}
	id, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, invalidArgument("ID %q is not below 2^64", text)
	}
	return id, nil
}

// timeNs is epoch_unix_ms × 10^6 + ticks × unit_ns, saturated at 2^63 − 1 as the server does.
func timeNs(epochUnixMs int64, ticks, unitNs uint64) int64 {
	hi, lo := bits.Mul64(ticks, unitNs)
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	epochNs := epochUnixMs * int64(time.Millisecond)
	if epochNs > 0 && int64(lo) > math.MaxInt64-epochNs {
		return math.MaxInt64
	}
	return epochNs + int64(lo)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
