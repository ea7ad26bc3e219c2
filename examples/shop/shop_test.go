package main

// These tests build the shop binary and drive what a user runs: `shop dev`
// (a Temporal dev server, the worker and the API server in one process)
// over HTTP with eve's Go clients, and `shop mcp` over stdio.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/eve-temporal/eve/catalog"
	"github.com/eve-temporal/eve/client"
	"github.com/eve-temporal/eve/protocol"
	"github.com/eve-temporal/eve/toolsclient"
)

type stack struct {
	bin      string
	url      string // the API server
	temporal string // the dev server's address
	env      []string
	log      string // shop dev's output
}

// logTail is the end of shop dev's output, for failure messages.
func (s *stack) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "\n--- shop dev:\n" + string(b)
}

var (
	once   sync.Once
	shared *stack
	errUp  error
	stopUp func()
)

func TestMain(m *testing.M) {
	code := m.Run()
	if stopUp != nil {
		stopUp()
	}
	os.Exit(code)
}

// up builds the binary and starts `shop dev` once for the package.
func up(t *testing.T) *stack {
	t.Helper()
	once.Do(func() { shared, stopUp, errUp = start() })
	if errUp != nil {
		t.Fatal(errUp)
	}
	return shared
}

func start() (*stack, func(), error) {
	dir, err := os.MkdirTemp("", "shop-test-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	bin := filepath.Join(dir, "shop")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("build: %v\n%s", err, out)
	}
	temporalBin := os.Getenv("EVE_TEMPORAL_BIN")
	if temporalBin == "" {
		if temporalBin, err = filepath.Abs("../../bin/temporal"); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	if _, err := os.Stat(temporalBin); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("no Temporal CLI at %s: run `make bin/temporal` in the repository root, or set EVE_TEMPORAL_BIN", temporalBin)
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	supplierURL, err := supplier()
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	s := &stack{bin: bin, temporal: fmt.Sprintf("127.0.0.1:%d", ports[0]), url: fmt.Sprintf("http://127.0.0.1:%d", ports[2])}
	// The whole environment the binary sees: nothing of the caller's eve settings.
	s.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "EVE_TEMPORAL_BIN=" + temporalBin,
		"EVE_PAYLOAD_STORE=file:" + filepath.Join(dir, "payloads"), "EVE_TASK_QUEUE=shop-test",
		"SHOP_SUPPLIER_MCP_URL=" + supplierURL}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "dev", "--state-dir", filepath.Join(dir, "state"),
		"--address", s.temporal, "--ui-port", fmt.Sprint(ports[1]), "--addr", fmt.Sprintf("127.0.0.1:%d", ports[2]), "--metrics-addr", "")
	cmd.Dir = dir
	cmd.Env = s.env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	logFile, err := os.Create(filepath.Join(dir, "dev.log"))
	if err != nil {
		cancel()
		cleanup()
		return nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	s.log = logFile.Name()
	if err := cmd.Start(); err != nil {
		cancel()
		cleanup()
		return nil, nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		cancel()
		<-exited
		logFile.Close()
		cleanup()
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(s.url + "/eve/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, stop, nil
			}
		}
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logFile.Name())
			exited <- err
			stop()
			return nil, nil, fmt.Errorf("shop dev exited: %v\n%s", err, log)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile.Name())
			stop()
			return nil, nil, fmt.Errorf("shop dev did not answer at %s:\n%s", s.url, log)
		}
	}
}

// givenPorts are the ports freePort handed out: the kernel may offer a
// port again once its listener closed, and a stack of three needs three.
var givenPorts sync.Map

func freePort() (int, error) {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if _, taken := givenPorts.LoadOrStore(port, true); !taken {
			return port, nil
		}
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestPlainTool(t *testing.T) {
	s := up(t)
	turn, err := client.New(s.url).SendAndWait(ctx(t), "", "price of mug", nil)
	if err != nil {
		t.Fatal(err, s.logTail())
	}
	if turn.Status != client.TurnCompleted || turn.Reply != "A mug costs 1200 cents." {
		t.Fatalf("turn %s %q %s%s", turn.Status, turn.Reply, turn.Error, s.logTail())
	}
}

func TestApproval(t *testing.T) {
	s := up(t)
	c := client.New(s.url)
	turn, err := c.SendAndWait(ctx(t), "", "refund order o_7", nil)
	if err != nil {
		t.Fatal(err, s.logTail())
	}
	if turn.Status != client.TurnWaiting || len(turn.Open) != 1 || turn.Open[0].Action.ToolName != "refund_order" {
		t.Fatalf("turn %s, open %+v", turn.Status, turn.Open)
	}
	_, turn, err = c.RespondAndWait(ctx(t), turn.SessionID, []protocol.InputResponse{{RequestID: turn.Open[0].RequestID, OptionID: "approve"}}, nil)
	if err != nil {
		t.Fatal(err, s.logTail())
	}
	if turn.Status != client.TurnCompleted || turn.Reply != "Refund of o_7: refunded" {
		t.Fatalf("turn %s %q %s%s", turn.Status, turn.Reply, turn.Error, s.logTail())
	}
}

func TestClientToolQuestion(t *testing.T) {
	s := up(t)
	c := client.New(s.url)
	turn, err := c.SendAndWait(ctx(t), "", "ship order o_8", nil)
	if err != nil {
		t.Fatal(err, s.logTail())
	}
	if turn.Status != client.TurnWaiting || len(turn.Open) != 1 || turn.Open[0].Prompt != "How should we ship it?" {
		t.Fatalf("turn %s, open %+v", turn.Status, turn.Open)
	}
	_, turn, err = c.RespondAndWait(ctx(t), turn.SessionID, []protocol.InputResponse{{RequestID: turn.Open[0].RequestID, OptionID: "express"}}, nil)
	if err != nil {
		t.Fatal(err, s.logTail())
	}
	if turn.Status != client.TurnCompleted || turn.Reply != "Shipping o_8 by express." {
		t.Fatalf("turn %s %q %s%s", turn.Status, turn.Reply, turn.Error, s.logTail())
	}
}

// The delegated tool's job completes the call through its completion URL,
// which the worker signed with the secret `dev` keeps in its state dir.
func TestDelegatedJob(t *testing.T) {
	s := up(t)
	turn, err := client.New(s.url).SendAndWait(ctx(t), "", "pack order o_9", nil)
	if err != nil {
		t.Fatal(err, s.logTail())
	}
	if turn.Status != client.TurnCompleted || turn.Reply != "Order o_9 is packed in box box-o_9." {
		t.Fatalf("turn %s %q %s%s", turn.Status, turn.Reply, turn.Error, s.logTail())
	}
}

func TestToolsAPIListsShopTools(t *testing.T) {
	s := up(t)
	res, err := toolsclient.New(s.url, "").Tools.Get(ctx(t), catalog.GetToolsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range res.NameMap.CanonicalToWire {
		names = append(names, name)
	}
	slices.Sort(names)
	got := strings.Join(names, ",")
	for _, want := range []string{"shop.lookup_product", "shop.refund_order", "shop.choose_shipping", "shop.pack_order"} {
		if !strings.Contains(got, want) {
			t.Fatalf("GET /v1/tools lists %s; want %s", got, want)
		}
	}
	if strings.Contains(got, "demo.") {
		t.Fatalf("GET /v1/tools lists the demo's tools: %s", got)
	}
	out, err := toolsclient.New(s.url, "").Tools.Run(ctx(t), "shop.lookup_product", map[string]any{"sku": "poster"}, toolsclient.RunToolOptions{})
	if err != nil || !strings.Contains(string(out), `"priceCents":2500`) {
		t.Fatalf("run = %s %v", out, err)
	}
}

// `shop mcp` on stdio lists the shop's tools that run without a person
// (approval-gated and client tools need a session; delegated ones need MCP
// Tasks) and calls one.
func TestMCPListsShopTools(t *testing.T) {
	s := up(t)
	cmd := exec.Command(s.bin, "mcp", "--address", s.temporal, "--user", "mcp-test")
	cmd.Env = s.env
	c := mcp.NewClient(&mcp.Implementation{Name: "shop-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "shop.lookup_product") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "demo.") }) {
		t.Fatalf("tools/list = %v", names)
	}
	res, err := cs.CallTool(ctx(t), &mcp.CallToolParams{Name: "shop.lookup_product", Arguments: map[string]any{"sku": "mug"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"priceCents":1200`) {
		t.Fatalf("tools/call = %+v %v", res, err)
	}
}

// supplier serves the supplier's MCP server (go-sdk, streamable HTTP) on a
// loopback port for the test's shop: one read-only tool, stock.
func supplier() (string, error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "supplier", Version: "1.0.0"}, nil)
	type in struct {
		SKU string `json:"sku"`
	}
	type out struct {
		SKU   string `json:"sku"`
		Units int    `json:"units"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "stock", Description: "Units of a product the supplier has in stock.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, i in) (*mcp.CallToolResult, out, error) {
			return nil, out{SKU: i.SKU, Units: 40 + len(i.SKU)}, nil
		})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go http.Serve(l, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	return "http://" + l.Addr().String() + "/mcp", nil
}

// A connection: the supplier's MCP tool, called through a turn.
func TestMCPConnection(t *testing.T) {
	s := up(t)
	turn, err := client.New(s.url).SendAndWait(ctx(t), "", "stock of mug", nil)
	if err != nil {
		t.Fatal(err, s.logTail())
	}
	if turn.Status != client.TurnCompleted || turn.Reply != "The supplier has 43 of mug in stock." {
		t.Fatalf("turn %s %q %s%s", turn.Status, turn.Reply, turn.Error, s.logTail())
	}
}
