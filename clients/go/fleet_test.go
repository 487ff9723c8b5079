//go:build integration

package flurry

// Helpers for the integration tests, which run under clients/conformance/fleet.py: real
// servers behind fault-injecting proxies, addressed by the FLURRY_TEST_* variables.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

type proxyStats struct {
	IDs struct {
		Requests    int `json:"requests"`
		InFlight    int `json:"in_flight"`
		MaxInFlight int `json:"max_in_flight"`
	} `json:"ids"`
	Segments struct {
		Requests    int `json:"requests"`
		InFlight    int `json:"in_flight"`
		MaxInFlight int `json:"max_in_flight"`
	} `json:"segments"`
	TSO struct {
		Requests    int `json:"requests"`
		InFlight    int `json:"in_flight"`
		MaxInFlight int `json:"max_in_flight"`
	} `json:"tso"`
	Faulted int `json:"faulted"`
	Reset   int `json:"reset"`
	Other   int `json:"other"`
}

func fleetEnv(t *testing.T, name string) []string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: run the integration tests under clients/conformance/fleet.py", name)
	}
	return strings.Split(v, ",")
}

func endpoints(t *testing.T) []string { return fleetEnv(t, "FLURRY_TEST_ENDPOINTS") }
func servers(t *testing.T) []string   { return fleetEnv(t, "FLURRY_TEST_SERVERS") }

var plainHTTP = &http.Client{Timeout: 30 * time.Second}

func control(t *testing.T, method, path string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, fleetEnv(t, "FLURRY_TEST_CONTROL")[0]+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := plainHTTP.Do(req)
	if err != nil {
		t.Fatalf("control %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("control %s %s: %d %s", method, path, resp.StatusCode, body)
	}
	return body
}

func resetStats(t *testing.T) {
	for i := range endpoints(t) {
		control(t, "POST", fmt.Sprintf("/servers/%d/reset", i))
	}
}

func stats(t *testing.T, i int) proxyStats {
	var s proxyStats
	if err := json.Unmarshal(control(t, "GET", fmt.Sprintf("/servers/%d/stats", i)), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// restoreFleet puts every server back as the fleet started: running, no fault, no delay.
func restoreFleet(t *testing.T) {
	t.Cleanup(func() {
		for i := range endpoints(t) {
			control(t, "POST", fmt.Sprintf("/servers/%d/fault?status=503&count=0", i))
			control(t, "POST", fmt.Sprintf("/servers/%d/delay?ms=0&count=0", i))
			control(t, "POST", fmt.Sprintf("/servers/%d/start", i))
		}
	})
}

// idRequests200 sums flurry_http_requests_total{route="/v1/ids"} over the servers, for code
// 200 only (code "") or every code (code "*").
func idRequests(t *testing.T, code string) int64 {
	t.Helper()
	var total int64
	for _, s := range servers(t) {
		resp, err := plainHTTP.Get(s + "/metrics")
		if err != nil {
			t.Fatalf("metrics of %s: %v", s, err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, `flurry_http_requests_total{route="/v1/ids",`) {
				continue
			}
			if code != "*" && !strings.Contains(line, `code="`+code+`"`) {
				continue
			}
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			total += int64(v)
		}
		resp.Body.Close()
	}
	return total
}

// serverNode is the node ID server i holds (from /readyz).
func serverNode(t *testing.T, i int) uint64 {
	resp, err := plainHTTP.Get(servers(t)[i] + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Node uint64 `json:"node"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r.Node
}

func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	if o.Endpoints == nil {
		o.Endpoints = endpoints(t)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func flurryError(t *testing.T, err error) *Error {
	t.Helper()
	fe, ok := err.(*Error)
	if !ok {
		t.Fatalf("got %T %v, want *flurry.Error", err, err)
	}
	return fe
}

// waitFor polls cond every 10 ms until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

var bg = context.Background()

// tsoLeader is the index of the server that leads the timestamp oracle (its GET /readyz/tso
// answers 200), waiting up to 30 s for one to lead.
func tsoLeader(t *testing.T) int {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		for i, s := range servers(t) {
			if resp, err := plainHTTP.Get(s + "/readyz/tso"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return i
				}
			}
		}
	}
	t.Fatal("no server leads the timestamp oracle after 30 s")
	return -1
}
