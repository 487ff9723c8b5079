package flurry

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Options configures a Client. Zero values mean the defaults shown; New validates them once.
type Options struct {
	// Endpoints are one or more http:// or https:// base URLs of flurry servers (required).
	// The client uses one at a time, starting with the first, and fails over to the next.
	Endpoints []string
	// Token is a bearer token sent on every request (Authorization: Bearer ...); none if empty.
	Token string
	// MaxAge: an ID whose request was sent longer ago than this is discarded, never handed
	// out (default 1 s).
	MaxAge time.Duration
	// MinBatch is the first and smallest refill (default 256).
	MinBatch int
	// MaxBatch is the largest refill (default 16384; never more than the server's max_batch).
	MaxBatch int
	// LowWater: a refill starts when fewer than LowWater × batch fresh IDs are left; in (0, 1)
	// (default 0.5).
	LowWater float64
	// Timeout is the deadline of one call, retries included (default 5 s). A context deadline
	// that is sooner wins.
	Timeout time.Duration
	// SegmentRange is the numbers per segment range request (default 1000).
	SegmentRange int
	// SegmentPrefetch is the share of a range used before the next one is fetched; in (0, 1)
	// (default 0.1).
	SegmentPrefetch float64
	// HTTPClient, if set, sends the requests (its Transport should keep connections alive);
	// by default the client makes its own.
	HTTPClient *http.Client

	// Test hooks (package tests only): the monotonic clock, the sleep between retry rounds and
	// the jitter source.
	mono   func() time.Duration
	sleep  func(ctx context.Context, d time.Duration) error
	random func() float64
}

// SettingsError is what New returns for a bad setting (errors.As finds it). It unwraps to an
// *Error with code INVALID_ARGUMENT and the same message, so errors.As(err, &flurryErr) finds
// that too. A bad setting is a programming error: never retry it.
type SettingsError struct {
	// Setting is the Options field at fault ("MaxAge", "Endpoints", ...).
	Setting string
	// Message says what is wrong; it starts with the setting's name and a colon.
	Message string
}

func (e *SettingsError) Error() string { return "flurry: bad setting: " + e.Message }

// Unwrap gives the *Error (code INVALID_ARGUMENT) the other languages' clients raise.
func (e *SettingsError) Unwrap() error { return &Error{Code: "INVALID_ARGUMENT", Message: e.Message} }

func settingError(setting, format string, args ...interface{}) *SettingsError {
	return &SettingsError{Setting: setting, Message: setting + ": " + fmt.Sprintf(format, args...)}
}

// normalized returns the options with defaults filled in, or an error naming the bad setting.
func (o Options) normalized() (Options, error) {
	if len(o.Endpoints) == 0 {
		return o, settingError("Endpoints", "at least one endpoint is required")
	}
	eps := make([]string, len(o.Endpoints))
	for i, e := range o.Endpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return o, settingError("Endpoints", "%q (number %d) is not an http:// or https:// base URL", e, i)
		}
		eps[i] = strings.TrimRight(e, "/")
	}
	o.Endpoints = eps
	if strings.ContainsAny(o.Token, "\r\n") {
		return o, settingError("Token", "must be one line")
	}
	durations := []struct {
		name  string
		value *time.Duration
		def   time.Duration
	}{{"MaxAge", &o.MaxAge, time.Second}, {"Timeout", &o.Timeout, 5 * time.Second}}
	for _, d := range durations {
		if *d.value < 0 {
			return o, settingError(d.name, "%v is negative", *d.value)
		}
		if *d.value == 0 {
			*d.value = d.def
		}
	}
	counts := []struct {
		name  string
		value *int
		def   int
	}{{"MinBatch", &o.MinBatch, 256}, {"MaxBatch", &o.MaxBatch, 16384}, {"SegmentRange", &o.SegmentRange, 1000}}
	for _, c := range counts {
		if *c.value < 0 {
			return o, settingError(c.name, "%d is negative", *c.value)
		}
		if *c.value == 0 {
			*c.value = c.def
		}
	}
	if o.MinBatch > o.MaxBatch {
		return o, settingError("MinBatch", "%d is larger than MaxBatch (%d)", o.MinBatch, o.MaxBatch)
	}
	shares := []struct {
		name  string
		value *float64
		def   float64
	}{{"LowWater", &o.LowWater, 0.5}, {"SegmentPrefetch", &o.SegmentPrefetch, 0.1}}
	for _, s := range shares {
		if *s.value == 0 {
			*s.value = s.def
		}
		if math.IsNaN(*s.value) || *s.value <= 0 || *s.value >= 1 {
			return o, settingError(s.name, "%v is outside (0, 1)", *s.value)
		}
	}
	return o, nil
}
