// Command flurry-bench measures the Go client against one flurry server (FLURRY_BENCH_SERVER,
// the server itself, no proxy) and prints one JSON object per line: IDs per second from the
// prefetch buffer ("buffer") and with one GET /v1/ids?count=1 per ID ("per_request"), each with
// 1 and 8 callers, and the server's /v1/ids requests per million IDs.
//
//	flurry-bench [--duration S]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	flurry "flurry.dev/client"
)

type result struct {
	Client             string  `json:"client"`
	Bench              string  `json:"bench"`
	Callers            int     `json:"callers"`
	IDs                int64   `json:"ids"`
	Seconds            float64 `json:"seconds"`
	IDsPerS            float64 `json:"ids_per_s"`
	Requests           int64   `json:"requests"`
	RequestsPerMillion float64 `json:"requests_per_million"`
}

// idRequests is the server's flurry_http_requests_total{route="/v1/ids"}, all codes.
func idRequests(server string) (int64, error) {
	resp, err := http.Get(server + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var total int64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, `flurry_http_requests_total{route="/v1/ids",`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				return 0, fmt.Errorf("metrics line %q: %v", line, err)
			}
			total += int64(v)
		}
	}
	return total, sc.Err()
}

// run has callers goroutines call take until duration passes; the IDs taken in all.
func run(callers int, duration time.Duration, take func(caller int) error) (int64, time.Duration, error) {
	var stop atomic.Bool
	var total atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var n int64
			for !stop.Load() {
				if err := take(g); err != nil {
					firstErr.CompareAndSwap(nil, err)
					break
				}
				n++
			}
			total.Add(n)
		}(g)
	}
	time.Sleep(duration)
	stop.Store(true)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, 0, err
	}
	return total.Load(), time.Since(start), nil
}

func main() {
	duration := flag.Float64("duration", 3, "seconds per measurement")
	flag.Parse()
	server := strings.TrimRight(os.Getenv("FLURRY_BENCH_SERVER"), "/")
	if server == "" {
		fmt.Fprintln(os.Stderr, "flurry-bench: set FLURRY_BENCH_SERVER to a server's base URL")
		os.Exit(2)
	}
	d := time.Duration(*duration * float64(time.Second))
	out := json.NewEncoder(os.Stdout)
	measure := func(bench string, callers int, take func(caller int) error) {
		before, err := idRequests(server)
		if err != nil {
			fmt.Fprintln(os.Stderr, "flurry-bench:", err)
			os.Exit(1)
		}
		ids, elapsed, err := run(callers, d, take)
		if err != nil {
			fmt.Fprintf(os.Stderr, "flurry-bench: %s/%d: %v\n", bench, callers, err)
			os.Exit(1)
		}
		after, err := idRequests(server)
		if err != nil {
			fmt.Fprintln(os.Stderr, "flurry-bench:", err)
			os.Exit(1)
		}
		r := result{Client: "go", Bench: bench, Callers: callers, IDs: ids, Seconds: elapsed.Seconds(),
			Requests: after - before}
		r.IDsPerS = float64(ids) / r.Seconds
		if ids > 0 {
			r.RequestsPerMillion = float64(r.Requests) * 1e6 / float64(ids)
		}
		out.Encode(r)
	}
	ctx := context.Background()

	for _, callers := range []int{1, 8} {
		c, err := flurry.New(flurry.Options{Endpoints: []string{server}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "flurry-bench:", err)
			os.Exit(2)
		}
		measure("buffer", callers, func(int) error {
			_, err := c.Next(ctx)
			return err
		})
		c.Close()
	}

	for _, callers := range []int{1, 8} {
		clients := make([]*http.Client, callers) // each caller its own keep-alive connection
		for i := range clients {
			clients[i] = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
		}
		url := server + "/v1/ids?count=1"
		measure("per_request", callers, func(caller int) error {
			resp, err := clients[caller].Get(url)
			if err != nil {
				return err
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			var ids struct {
				IDs []string `json:"ids"`
			}
			if resp.StatusCode != 200 || json.Unmarshal(body, &ids) != nil || len(ids.IDs) != 1 {
				return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
			}
			if _, err := strconv.ParseUint(ids.IDs[0], 10, 64); err != nil {
				return err
			}
			return nil
		})
		for _, hc := range clients {
			hc.CloseIdleConnections()
		}
	}
}
