package flurry

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// Error is every failure the client returns (use errors.As). It carries the server's answer
// when there was one.
type Error struct {
	// Code is the canonical code name from the server's error body (UNAVAILABLE,
	// INVALID_ARGUMENT, ...): UNAVAILABLE for a connection error, DEADLINE_EXCEEDED when the
	// call's deadline ran out before any server answered.
	Code string
	// Reason is the server's finer reason (LEASE_EXPIRING, CLOCK_BEHIND, ...), empty when none.
	Reason string
	// Message is the server's message, or the client's description of what failed.
	Message string
	// HTTPStatus is the answer's HTTP status, 0 when no HTTP answer came.
	HTTPStatus int
	// RetryAfter is the answer's Retry-After (whole seconds); valid only when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Endpoint is the base URL that answered (or failed to), empty for local errors.
	Endpoint string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("flurry: ")
	b.WriteString(e.Code)
	if e.Reason != "" {
		b.WriteString(" (" + e.Reason + ")")
	}
	if e.HTTPStatus != 0 {
		fmt.Fprintf(&b, " HTTP %d", e.HTTPStatus)
	}
	if e.Endpoint != "" {
		b.WriteString(" from " + e.Endpoint)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// action is what the client does with an answer (docs/clients.md, "Errors and retries").
type action int

const (
	actionDone     action = iota // 2xx
	actionRetry                  // try the next endpoint, then wait and start another round
	actionFailover               // try the next endpoint, not this one again in this call
	actionFatal                  // return at once
)

func (a action) String() string {
	return [...]string{"done", "retry", "failover", "fatal"}[a]
}

// classify maps an answer to its action; status 0 is a connection error.
func classify(status int, hasRetryAfter bool) action {
	switch {
	case status == 0:
		return actionRetry
	case status >= 200 && status < 300:
		return actionDone
	case status == 502 || status == 503 || status == 504:
		if hasRetryAfter {
			return actionRetry
		}
		return actionFailover
	default:
		return actionFatal
	}
}

// parseRetryAfter reads a Retry-After value: delta-seconds only; any other value counts as 1 s.
func parseRetryAfter(value string) time.Duration {
	value = strings.TrimSpace(value)
	if value == "" || len(value) > 9 {
		return time.Second
	}
	var n int64
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c < '0' || c > '9' {
			return time.Second
		}
		n = n*10 + int64(c-'0')
	}
	return time.Duration(n) * time.Second
}

// errorFromAnswer turns a non-2xx answer into an Error. retryAfter is the header's value and
// hasRetryAfter whether the header was present. A body that is not flurry's error JSON is not
// guessed at: the code follows the HTTP status.
func errorFromAnswer(endpoint string, status int, retryAfter string, hasRetryAfter bool, body []byte) *Error {
	e := &Error{HTTPStatus: status, Endpoint: endpoint}
	if hasRetryAfter {
		e.HasRetryAfter = true
		e.RetryAfter = parseRetryAfter(retryAfter)
	}
	var parsed struct {
		Error *struct {
			Code    *string `json:"code"`
			Reason  string  `json:"reason"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &parsed) == nil && parsed.Error != nil && parsed.Error.Code != nil &&
		*parsed.Error.Code != "" {
		e.Code = *parsed.Error.Code
		e.Reason = parsed.Error.Reason
		e.Message = parsed.Error.Message
		return e
	}
	if status == 502 || status == 503 || status == 504 {
		e.Code = "UNAVAILABLE"
	} else {
		e.Code = "UNKNOWN"
	}
	const quoted = 200
	text := strings.TrimSpace(string(body))
	if len(text) > quoted {
		text = text[:quoted] + "..."
	}
	e.Message = fmt.Sprintf("HTTP %d", status)
	if text != "" {
		e.Message += ": " + text
	}
	return e
}

func connectionError(endpoint string, err error) *Error {
	return &Error{Code: "UNAVAILABLE", Message: err.Error(), Endpoint: endpoint}
}

func invalidArgument(format string, args ...interface{}) *Error {
	return &Error{Code: "INVALID_ARGUMENT", Message: fmt.Sprintf(format, args...)}
}

// retryWait is the wait after failed round r (0, 1, ...): max(retryAfter, min(0.1 s × 2^r, 5 s))
// × (1 + 0.2 u), u uniform in [0, 1).
func retryWait(round int, retryAfter time.Duration, u float64) time.Duration {
	backoff := 5 * time.Second
	if round < 6 { // 0.1 s × 2^6 > 5 s
		backoff = 100 * time.Millisecond << uint(round)
	}
	if backoff > 5*time.Second {
		backoff = 5 * time.Second
	}
	base := backoff
	if retryAfter > base {
		base = retryAfter
	}
	return time.Duration(math.Round(float64(base) * (1 + 0.2*u)))
}
