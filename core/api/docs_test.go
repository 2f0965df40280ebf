package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/revenantrt/revenant/core"
	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/event"
	"github.com/revenantrt/revenant/internal/treetest"
)

// section returns the lines of a "## Title" section of a markdown file.
func section(t *testing.T, doc, title string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(strings.TrimPrefix(line, "## ")) == title
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	require.NotEmpty(t, out, "no section %q", title)
	return out
}

func cells(line string) []string {
	parts := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// docs/api.md is the contract: its route table and error table list exactly
// what the handler serves and answers.
func TestDocsMatchHandler(t *testing.T) {
	raw, err := os.ReadFile("../../docs/api.md")
	require.NoError(t, err)
	doc := string(raw)

	var documented []string
	for _, line := range section(t, doc, "Routes") {
		for _, m := range []string{"GET", "POST", "DELETE"} {
			if strings.HasPrefix(line, "| "+m+" ") {
				c := cells(line)
				documented = append(documented, c[0]+" "+strings.Trim(c[1], "`"))
			}
		}
	}
	sort.Strings(documented)
	assert.Equal(t, servedRoutes(), documented, "routes in docs/api.md")

	documentedErrors := map[api.ErrorType]int{}
	for _, line := range section(t, doc, "Errors") {
		if strings.HasPrefix(line, "| `") {
			c := cells(line)
			status, err := strconv.Atoi(c[1])
			require.NoError(t, err, line)
			documentedErrors[api.ErrorType(strings.Trim(c[0], "`"))] = status
		}
	}
	assert.Equal(t, api.Statuses, documentedErrors, "error table in docs/api.md")

	var listed []string
	for _, line := range section(t, doc, "Event types") {
		for _, part := range strings.Split(line, "**`")[1:] {
			if typ, _, ok := strings.Cut(part, "`**"); ok {
				listed = append(listed, typ)
			}
		}
	}
	sort.Strings(listed)
	assert.Equal(t, eventTypes(t), listed, "event types in docs/api.md vs core/event")
}

// README.md's table from each concept of the design to its files names
// files that exist.
func TestReadmeConceptFilesExist(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var named int
	for _, line := range section(t, string(raw), "Where each concept lives") {
		for _, quoted := range backticked(line) {
			if !strings.Contains(quoted, "/") || !strings.Contains(filepath.Base(quoted), ".") {
				continue // a name (Instance.Admit), not a file
			}
			named++
			_, err := os.Stat(filepath.Join("../..", quoted))
			assert.NoError(t, err, "README.md names %s", quoted)
		}
	}
	assert.Greater(t, named, 30, "README.md's concept table names files")
}

// servedRoutes is api.Routes as sorted "METHOD /pattern" strings.
func servedRoutes() []string {
	var out []string
	for _, r := range api.Routes {
		out = append(out, r.Method+" "+r.Pattern)
	}
	sort.Strings(out)
	return out
}

// --- docs/openapi.yaml ---------------------------------------------------
//
// The tests below read the subset of OpenAPI 3.1 that docs/openapi.yaml
// uses and hold it to the handler: the same routes, the event types core
// defines, and schemas that the JSON the handler really writes conforms to
// (no undocumented field, every required field present, and required being
// exactly the fields the handler always writes).

// schema is the part of a JSON Schema the docs use.
type schema struct {
	Ref         string             `yaml:"$ref"`
	Type        any                `yaml:"type"` // a name or a list of names
	Description string             `yaml:"description"`
	Required    []string           `yaml:"required"`
	Properties  map[string]*schema `yaml:"properties"`
	Items       *schema            `yaml:"items"`
	MaxItems    *int               `yaml:"maxItems"`
	OneOf       []*schema          `yaml:"oneOf"`
	AnyOf       []*schema          `yaml:"anyOf"`
	Enum        []any              `yaml:"enum"`
	Const       any                `yaml:"const"`
}

type response struct {
	Ref         string `yaml:"$ref"`
	Description string `yaml:"description"`
	Content     map[string]struct {
		Schema *schema `yaml:"schema"`
	} `yaml:"content"`
}

type operation struct {
	Responses map[string]*response `yaml:"responses"`
}

type openAPI struct {
	Paths      map[string]map[string]yaml.Node `yaml:"paths"`
	Components struct {
		Schemas   map[string]*schema   `yaml:"schemas"`
		Responses map[string]*response `yaml:"responses"`
	} `yaml:"components"`
}

// httpMethods are the path-item keys that name operations; the others
// (parameters, summary) do not.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	raw, err := os.ReadFile("../../docs/openapi.yaml")
	require.NoError(t, err)
	var doc openAPI
	require.NoError(t, yaml.Unmarshal(raw, &doc), "parse docs/openapi.yaml")
	require.NotEmpty(t, doc.Paths, "docs/openapi.yaml has no paths")
	return &doc
}

// operation returns the documented operation, or nil.
func (d *openAPI) operation(t *testing.T, method, pattern string) *operation {
	t.Helper()
	node, ok := d.Paths[pattern][strings.ToLower(method)]
	if !ok {
		return nil
	}
	var op operation
	require.NoError(t, node.Decode(&op), "decode %s %s", method, pattern)
	return &op
}

// resolve follows a schema's $ref (only local component refs are used).
func (d *openAPI) resolve(t *testing.T, s *schema) *schema {
	t.Helper()
	for s != nil && s.Ref != "" {
		name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/")
		require.True(t, ok, "unexpected $ref %q", s.Ref)
		next := d.Components.Schemas[name]
		require.NotNil(t, next, "dangling $ref %q", s.Ref)
		s = next
	}
	return s
}

func (d *openAPI) namedSchema(t *testing.T, name string) *schema {
	t.Helper()
	s := d.Components.Schemas[name]
	require.NotNil(t, s, "docs/openapi.yaml has no schema %s", name)
	return s
}

// responseSchema is the JSON schema documented for the status of a route;
// the test fails if the route does not document that status.
func (d *openAPI) responseSchema(t *testing.T, method, pattern string, status int) *schema {
	t.Helper()
	op := d.operation(t, method, pattern)
	require.NotNil(t, op, "docs/openapi.yaml has no %s %s", method, pattern)
	r := op.Responses[strconv.Itoa(status)]
	require.NotNil(t, r, "docs/openapi.yaml: %s %s does not document status %d", method, pattern, status)
	r = d.responseRef(t, r)
	c, ok := r.Content["application/json"]
	require.True(t, ok, "docs/openapi.yaml: %s %s %d has no application/json body", method, pattern, status)
	return c.Schema
}

func (d *openAPI) responseRef(t *testing.T, r *response) *response {
	t.Helper()
	if r.Ref == "" {
		return r
	}
	name, ok := strings.CutPrefix(r.Ref, "#/components/responses/")
	require.True(t, ok, "unexpected $ref %q", r.Ref)
	next := d.Components.Responses[name]
	require.NotNil(t, next, "dangling $ref %q", r.Ref)
	return next
}

// typeNames is a schema's "type" as a list.
func typeNames(s *schema) []string {
	switch v := s.Type.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

// jsonType names the JSON type of a value decoded with UseNumber.
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// problems lists how v fails to conform to s; path names where in the
// body. Objects are held strictly: a field the schema does not list is a
// problem (a schema without properties, like config, lists none to hold).
func (d *openAPI) problems(t *testing.T, s *schema, v any, path string) []string {
	t.Helper()
	s = d.resolve(t, s)
	if alts := append(slices.Clone(s.OneOf), s.AnyOf...); len(alts) > 0 {
		for _, alt := range alts {
			if len(d.problems(t, alt, v, path)) == 0 {
				return nil
			}
		}
		return []string{fmt.Sprintf("%s: %s matches none of the alternatives", path, compact(v))}
	}
	var out []string
	got := jsonType(v)
	if types := typeNames(s); len(types) > 0 && !slices.Contains(types, got) &&
		!(got == "integer" && slices.Contains(types, "number")) {
		return []string{fmt.Sprintf("%s: %s is %s, documented as %v", path, compact(v), got, types)}
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		out = append(out, fmt.Sprintf("%s: %v is not in the documented enum %v", path, v, s.Enum))
	}
	if s.Const != nil && fmt.Sprint(s.Const) != fmt.Sprint(v) {
		out = append(out, fmt.Sprintf("%s: %v is not the documented const %v", path, v, s.Const))
	}
	switch x := v.(type) {
	case map[string]any:
		for _, name := range s.Required {
			if _, ok := x[name]; !ok {
				out = append(out, fmt.Sprintf("%s: required %q is missing", path, name))
			}
		}
		if s.Properties != nil {
			for name, fv := range x {
				ps, ok := s.Properties[name]
				if !ok {
					out = append(out, fmt.Sprintf("%s: %q is written but not documented", path, name))
					continue
				}
				out = append(out, d.problems(t, ps, fv, path+"."+name)...)
			}
		}
	case []any:
		if s.MaxItems != nil && len(x) > *s.MaxItems {
			out = append(out, fmt.Sprintf("%s: %d items, documented at most %d", path, len(x), *s.MaxItems))
		}
		if s.Items != nil {
			for i, item := range x {
				out = append(out, d.problems(t, s.Items, item, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return out
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:120]) + "…"
	}
	return string(b)
}

// conforms asserts that body conforms to s.
func (d *openAPI) conforms(t *testing.T, s *schema, body any, what string) {
	t.Helper()
	assert.Empty(t, d.problems(t, s, body, what), "%s does not conform to docs/openapi.yaml", what)
}

// alwaysWritten asserts that the schema's required fields are exactly the
// fields present in every one of the objects (instances the test made
// minimal: only what the handler always writes, plus fields the others
// leave out).
func (d *openAPI) alwaysWritten(t *testing.T, s *schema, what string, objs ...any) {
	t.Helper()
	s = d.resolve(t, s)
	require.NotEmpty(t, objs)
	var common []string
	for i, o := range objs {
		m, ok := o.(map[string]any)
		require.True(t, ok, "%s: not an object: %s", what, compact(o))
		var keys []string
		for k := range m {
			if i == 0 || slices.Contains(common, k) {
				keys = append(keys, k)
			}
		}
		common = keys
	}
	sort.Strings(common)
	required := slices.Sorted(slices.Values(s.Required))
	assert.Equal(t, common, required, "%s: the fields always written should be exactly the schema's required", what)
}

// Every route the handler serves is in openapi's paths with the same
// methods, and openapi documents no other.
func TestOpenAPIRoutes(t *testing.T) {
	d := loadOpenAPI(t)
	var documented []string
	for path, item := range d.Paths {
		for key := range item {
			if slices.Contains(httpMethods, key) {
				documented = append(documented, strings.ToUpper(key)+" "+path)
			}
		}
	}
	sort.Strings(documented)
	assert.Equal(t, servedRoutes(), documented, "routes in docs/openapi.yaml")
}

// eventTypes reads the event types core defines: every constant of type
// event.Type in core/event. Parsing the source (not a list kept by hand)
// is what makes a new type fail this test until it is documented.
func eventTypes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../event/*.go")
	require.NoError(t, err)
	var out []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			if id, ok := spec.Type.(*ast.Ident); !ok || id.Name != "Type" {
				return true
			}
			for _, v := range spec.Values {
				lit, ok := v.(*ast.BasicLit)
				require.True(t, ok, "event type constant that is not a literal")
				s, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				out = append(out, s)
			}
			return true
		})
	}
	require.NotEmpty(t, out, "no event types found in core/event")
	sort.Strings(out)
	return out
}

// payloads maps every event type to its payload struct. A type core adds
// fails TestOpenAPIEvents until it is entered here and documented.
var payloads = map[event.Type]any{
	event.SessionCreated:       event.Created{},
	event.PromptAdmitted:       event.Admitted{},
	event.PromptCancelled:      event.Cancelled{},
	event.MessageAdded:         event.Message{},
	event.ExecutionStarted:     event.Started{},
	event.ExecutionResumed:     event.Resumed{},
	event.ExecutionSucceeded:   event.Succeeded{},
	event.ExecutionFailed:      event.Failed{},
	event.ExecutionInterrupted: event.Interrupted{},
	event.Progress:             event.ProgressMade{},
	event.JobStarted:           event.Job{},
	event.JobEnded:             event.Job{},
	event.StepStarted:          event.StepBegun{},
	event.TextCheckpoint:       event.Checkpoint{},
	event.StepCompleted:        event.StepDone{},
	event.StepCut:              event.Cut{},
	event.ToolExecuting:        event.Executing{},
	event.ToolSettled:          event.Settled{},
	event.RetryScheduled:       event.Retry{},
	event.StepParked:           event.Parked{},
	event.QuestionAnswered:     event.Resolution{},
	event.QuestionCancelled:    event.Resolution{},
	event.TaskResolved:         event.Resolution{},
	event.TaskCancelled:        event.Resolution{},
	event.PermissionApproved:   event.Resolution{},
	event.PermissionRejected:   event.Resolution{},
	event.PermissionCancelled:  event.Resolution{},
	event.PermissionRuleSaved:  event.RuleSaved{},
	event.TextDelta:            event.Delta{},
}

// jsonFields lists a struct's JSON field names and the ones written always
// (no omitempty).
func jsonFields(v any) (all, always []string) {
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") {
			always = append(always, name)
		}
	}
	sort.Strings(all)
	sort.Strings(always)
	return all, always
}

// schemaFields lists a schema's properties and required fields, sorted.
func schemaFields(s *schema) (props, required []string) {
	for name := range s.Properties {
		props = append(props, name)
	}
	sort.Strings(props)
	return props, slices.Sorted(slices.Values(s.Required))
}

// payloadSchema is the one schema of Event.data's alternatives whose
// description names typ.
func (d *openAPI) payloadSchema(t *testing.T, typ string) *schema {
	t.Helper()
	var found []*schema
	for _, alt := range d.namedSchema(t, "Event").Properties["data"].AnyOf {
		s := d.resolve(t, alt)
		if slices.Contains(strings.Fields(s.Description), typ) {
			found = append(found, s)
		}
	}
	require.Len(t, found, 1, "docs/openapi.yaml: Event.data should have exactly one payload schema whose description names %s", typ)
	return found[0]
}

// The event type enum is the set core defines, each type has a payload
// schema, and every payload schema and the envelope list exactly the
// struct's fields, required exactly where the struct always writes them.
func TestOpenAPIEvents(t *testing.T) {
	d := loadOpenAPI(t)
	ev := d.namedSchema(t, "Event")
	var enum []string
	for _, e := range ev.Properties["type"].Enum {
		enum = append(enum, fmt.Sprint(e))
	}
	sort.Strings(enum)
	defined := eventTypes(t)
	assert.Equal(t, defined, enum, "Event.type enum in docs/openapi.yaml vs core/event")

	envProps, envRequired := schemaFields(ev)
	all, always := jsonFields(event.Event{})
	assert.Equal(t, all, envProps, "Event properties vs event.Event")
	assert.Equal(t, always, envRequired, "Event required vs event.Event")

	used := map[*schema]bool{}
	for _, typ := range defined {
		p, ok := payloads[event.Type(typ)]
		if !assert.True(t, ok, "event type %s has no entry in this test's payloads", typ) {
			continue
		}
		s := d.payloadSchema(t, typ)
		used[s] = true
		props, required := schemaFields(s)
		all, always := jsonFields(p)
		assert.Equal(t, all, props, "properties of the payload schema of %s", typ)
		assert.Equal(t, always, required, "required of the payload schema of %s", typ)
	}
	for _, alt := range ev.Properties["data"].AnyOf {
		assert.True(t, used[d.resolve(t, alt)], "payload schema %s names no event type core defines", alt.Ref)
	}
}

// The error type enum is exactly the types the handler can answer, and a
// response documented under a status names only error types of that status.
func TestOpenAPIErrorTypes(t *testing.T) {
	d := loadOpenAPI(t)
	errSchema := d.namedSchema(t, "Error").Properties["error"]
	require.NotNil(t, errSchema)
	var enum, defined []string
	for _, e := range errSchema.Properties["type"].Enum {
		enum = append(enum, fmt.Sprint(e))
	}
	for typ := range api.Statuses {
		defined = append(defined, string(typ))
	}
	sort.Strings(enum)
	sort.Strings(defined)
	assert.Equal(t, defined, enum, "Error.error.type enum in docs/openapi.yaml vs api.Statuses")

	for path, item := range d.Paths {
		for _, m := range httpMethods {
			if _, ok := item[m]; !ok {
				continue
			}
			for code, r := range d.operation(t, m, path).Responses {
				r = d.responseRef(t, r)
				for _, typ := range backticked(r.Description) {
					status, known := api.Statuses[api.ErrorType(typ)]
					if known {
						assert.Equal(t, code, strconv.Itoa(status), "%s %s: %s documented under %s", m, path, typ, code)
					}
				}
			}
		}
	}
}

// backticked returns the `quoted` words of s.
func backticked(s string) []string {
	parts := strings.Split(s, "`")
	var out []string
	for i := 1; i < len(parts); i += 2 {
		out = append(out, parts[i])
	}
	return out
}

// scriptDriver runs a turn that writes every kind of transcript entry: a
// step that calls a tool, the tool's settlement (with a kv_put), progress,
// a text delta, and a second step left streaming, so the snapshot shows a
// partial answer. It then holds until the execution is cancelled. A
// prompt "hold" holds at once until cancelled; other prompts are answered
// at once.
type scriptDriver struct{ held chan struct{} }

func (s *scriptDriver) Run(ctx context.Context, x *core.Execution) core.Outcome {
	if x.Prompt() == "hold" {
		<-ctx.Done()
		return core.Outcome{Kind: core.Stopped}
	}
	if x.Prompt() != "script" {
		return treetest.Answer(ctx, x)
	}
	step1, step2, call := x.NewID(), x.NewID(), x.NewID()
	appends := []struct {
		progress bool
		evs      []core.NewEvent
	}{
		{false, []core.NewEvent{
			{Type: event.StepStarted, Payload: event.StepBegun{StepID: step1, ExecutionID: x.ID(), PromptID: x.PromptID(), Index: 1}},
			{Type: event.TextCheckpoint, Payload: event.Checkpoint{StepID: step1, Text: "storing"}},
		}},
		{true, []core.NewEvent{{Type: event.StepCompleted, Payload: event.StepDone{StepID: step1, Text: "storing",
			ToolCalls: []event.ToolCall{{CallID: call, Name: "kv_put", Arguments: `{"key":"k","value":"v"}`}},
			Finish:    "tool_calls", InputTokens: 3, OutputTokens: 2}}}},
		{false, []core.NewEvent{{Type: event.ToolExecuting, Payload: event.Executing{CallID: call, IdempotencyKey: x.ID() + "." + call}}}},
		{true, []core.NewEvent{{Type: event.ToolSettled, Payload: event.Settled{CallID: call, Outcome: event.OutcomeOK, Output: "stored",
			Ran: true, KVPuts: []event.KVPut{{Key: "k", Value: "v"}}}}}},
		{true, []core.NewEvent{{Type: event.Progress, Payload: event.ProgressMade{ExecutionID: x.ID(), What: "scripted"}}}},
		{false, []core.NewEvent{
			{Type: event.StepStarted, Payload: event.StepBegun{StepID: step2, ExecutionID: x.ID(), PromptID: x.PromptID(), Index: 2}},
			{Type: event.TextCheckpoint, Payload: event.Checkpoint{StepID: step2, Text: "half an ans"}},
		}},
	}
	for _, a := range appends {
		if _, err := x.Append(ctx, a.progress, a.evs...); err != nil {
			return core.Outcome{Kind: core.Stopped}
		}
	}
	x.Emit(event.TextDelta, event.Delta{StepID: step2, Text: "wer"})
	close(s.held)
	<-ctx.Done()
	return core.Outcome{Kind: core.Stopped}
}

// caller sends requests as one principal and decodes JSON answers with
// UseNumber, so integers stay integers for the schema check.
type caller struct {
	t     *testing.T
	base  string
	token string
}

func (c caller) send(method, path, body string, header ...string) (int, any) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	require.NoError(c.t, err)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, decodeJSON(c.t, string(raw))
}

func decodeJSON(t *testing.T, raw string) any {
	t.Helper()
	if raw == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), raw)
	return v
}

// sseFrames reads an event stream's frames until one has id last,
// returning the decoded data of each.
func sseFrames(t *testing.T, body io.Reader, last string) []any {
	t.Helper()
	r := bufio.NewReader(body)
	var out []any
	var id string
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err, "stream ended before event %s", last)
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			out = append(out, decodeJSON(t, strings.TrimPrefix(line, "data: ")))
		case line == "":
			if id == last {
				return out
			}
			id = ""
		}
	}
}

// Every JSON body the handler writes conforms to what docs/openapi.yaml
// documents for its route and status: driven through the handler over
// fake trees, from a fresh session through a turn with a tool call, the
// event stream, and one request for every error type.
func TestOpenAPIBodies(t *testing.T) {
	d := loadOpenAPI(t)
	tokens, err := api.ParseTokens("alice:secret-a")
	require.NoError(t, err)
	driver := &scriptDriver{held: make(chan struct{})}
	f := newFixture(t, driver, tokens)
	alice := caller{t: t, base: f.srv.URL, token: "secret-a"}

	// check sends a request and checks its answer against the documented
	// schema of the route (pattern) and status, returning the body.
	check := func(method, pattern, path, body string, want int, header ...string) any {
		t.Helper()
		status, got := alice.send(method, path, body, header...)
		require.Equal(t, want, status, "%s %s: %s", method, path, compact(got))
		if got == nil {
			op := d.operation(t, method, pattern)
			require.NotNil(t, op, "docs/openapi.yaml has no %s %s", method, pattern)
			assert.Contains(t, op.Responses, strconv.Itoa(status), "docs/openapi.yaml: %s %s does not document status %d", method, pattern, status)
			return nil
		}
		d.conforms(t, d.responseSchema(t, method, pattern, status), got, method+" "+pattern)
		return got
	}
	schemaOf := func(method, pattern string, status int) *schema {
		return d.responseSchema(t, method, pattern, status)
	}

	health := check("GET", "/healthz", "/healthz", "", 200)
	d.alwaysWritten(t, schemaOf("GET", "/healthz", 200), "health", health)
	created := check("POST", "/v1/sessions", "/v1/sessions", "", 201)
	d.alwaysWritten(t, schemaOf("POST", "/v1/sessions", 201), "created", created)
	id := created.(map[string]any)["id"].(string)
	p := "/v1/sessions/" + id

	list := check("GET", "/v1/sessions", "/v1/sessions", "", 200)
	d.alwaysWritten(t, schemaOf("GET", "/v1/sessions", 200), "session list", list)
	d.alwaysWritten(t, d.namedSchema(t, "SessionItem"), "session list item", list.(map[string]any)["sessions"].([]any)...)

	fresh := check("GET", "/v1/sessions/{id}", p, "", 200)
	d.alwaysWritten(t, schemaOf("GET", "/v1/sessions/{id}", 200), "fresh snapshot", fresh)
	for _, kind := range []string{"permissions", "questions"} {
		pattern := "/v1/sessions/{id}/" + kind
		d.alwaysWritten(t, schemaOf("GET", pattern, 200), kind, check("GET", pattern, p+"/"+kind, "", 200))
	}

	// The stream subscribes before its headers arrive: nothing committed
	// after this can be missed.
	req, err := http.NewRequest("GET", f.srv.URL+p+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer secret-a")
	stream, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, 200, stream.StatusCode)

	admitted := check("POST", "/v1/sessions/{id}/prompt", p+"/prompt", `{"text":"script","id":"p1"}`, 202)
	d.alwaysWritten(t, schemaOf("POST", "/v1/sessions/{id}/prompt", 202), "admission", admitted)
	<-driver.held
	check("POST", "/v1/sessions/{id}/prompt", p+"/prompt", `{"text":"queued"}`, 202)

	busy := check("GET", "/v1/sessions/{id}", p, "", 200).(map[string]any)
	assert.NotNil(t, busy["claim"], "a turn is running")
	messages := busy["messages"].([]any)
	require.Len(t, messages, 4, "user, assistant calling a tool, tool result, partial answer: %s", compact(messages))
	d.alwaysWritten(t, d.namedSchema(t, "Message"), "messages", messages...)
	d.alwaysWritten(t, d.namedSchema(t, "PromptInfo"), "prompts", busy["prompts"].([]any)...)

	interrupted := check("POST", "/v1/sessions/{id}/interrupt", p+"/interrupt", "", 200)
	d.alwaysWritten(t, schemaOf("POST", "/v1/sessions/{id}/interrupt", 200), "interrupt", interrupted)
	f.trees.tree(id).node.Idle()
	cursor := check("GET", "/v1/sessions/{id}", p, "", 200).(map[string]any)["cursor"].(json.Number)

	frames := sseFrames(t, stream.Body, cursor.String())
	evSchema := d.namedSchema(t, "Event")
	seen := map[string]bool{}
	for _, fr := range frames {
		d.conforms(t, evSchema, fr, "event")
		e := fr.(map[string]any)
		typ := fmt.Sprint(e["type"])
		seen[typ] = true
		d.conforms(t, d.payloadSchema(t, typ), e["data"], typ)
	}
	assert.True(t, seen[string(event.TextDelta)], "the stream carried the delta: %v", seen)
	assert.True(t, seen[string(event.ToolSettled)], "the stream carried the tool settlement: %v", seen)

	errorBodies(t, d, f, alice, id)

	check("DELETE", "/v1/sessions/{id}", p, "", 204)
}

// errorBodies produces every error type the handler can answer and checks
// each body against the route's documented response for its status.
func errorBodies(t *testing.T, d *openAPI, f *fixture, alice caller, id string) {
	p := "/v1/sessions/" + id
	anyone := caller{t: t, base: f.srv.URL}
	seen := map[api.ErrorType]bool{}
	errSchema := d.namedSchema(t, "Error")
	// expect checks a body of an error of type want; pattern "" is a
	// request no route matched, held to the Error schema itself.
	expect := func(what, pattern, method string, status int, body any, want api.ErrorType) {
		t.Helper()
		require.Equal(t, api.Statuses[want], status, "%s: %s", what, compact(body))
		s := errSchema
		if pattern != "" {
			s = d.responseSchema(t, method, pattern, status)
		}
		d.conforms(t, s, body, what)
		d.alwaysWritten(t, errSchema, what, body)
		d.alwaysWritten(t, errSchema.Properties["error"], what+" error", body.(map[string]any)["error"])
		assert.Equal(t, string(want), body.(map[string]any)["error"].(map[string]any)["type"], what)
		seen[want] = true
	}
	type tc struct {
		what, method, pattern, path, body string
		c                                 caller
		header                            []string
		want                              api.ErrorType
	}
	prompt := "/v1/sessions/{id}/prompt"
	for _, c := range []tc{
		{"malformed JSON", "POST", prompt, p + "/prompt", `{"text":`, alice, nil, api.ErrInvalidJSON},
		{"unknown field", "POST", prompt, p + "/prompt", `{"text":"a","colour":1}`, alice, nil, api.ErrInvalidRequest},
		{"body too large", "POST", prompt, p + "/prompt", `{"text":"` + strings.Repeat("a", 5000) + `"}`, alice, nil, api.ErrPayloadTooLarge},
		{"no token", "GET", "/v1/sessions", "/v1/sessions", "", anyone, nil, api.ErrUnauthorized},
		{"foreign origin", "GET", "/v1/sessions", "/v1/sessions", "", alice, []string{"Origin", "https://evil.example"}, api.ErrForbiddenOrigin},
		{"unknown session", "GET", "/v1/sessions/{id}", "/v1/sessions/nope", "", alice, nil, api.ErrNotFound},
		{"unknown route", "GET", "", "/v2/things", "", alice, nil, api.ErrNotFound},
		{"wrong method", "PUT", "", p, "", alice, nil, api.ErrMethodNotAllowed},
		{"bad limit", "GET", "/v1/sessions", "/v1/sessions?limit=0", "", alice, nil, api.ErrInvalidRequest},
		{"bad after", "GET", "/v1/sessions/{id}/events", p + "/events?after=-1", "", alice, nil, api.ErrInvalidRequest},
		{"unknown blocker", "POST", "/v1/sessions/{id}/questions/{qid}", p + "/questions/q1", `{"answers":[],"response_id":"r"}`, alice, nil, api.ErrNotFound},
	} {
		status, body := c.c.send(c.method, c.path, c.body, c.header...)
		expect(c.what, c.pattern, c.method, status, body, c.want)
	}

	status, body := alice.send("POST", p+"/prompt", `{"text":"one","id":"same"}`)
	require.Equal(t, 202, status, compact(body))
	status, body = alice.send("POST", p+"/prompt", `{"text":"two","id":"same"}`)
	expect("conflict", prompt, "POST", status, body, api.ErrConflict)

	// queue_full needs a session at its cap: one prompt, held running.
	f.trees.prepare = func(tr *treetest.Tree) { tr.Cfg = tr.Cfg.WithQueueCap(1) }
	status, body = alice.send("POST", "/v1/sessions", "")
	f.trees.prepare = nil
	require.Equal(t, 201, status, compact(body))
	capped := "/v1/sessions/" + body.(map[string]any)["id"].(string)
	status, body = alice.send("POST", capped+"/prompt", `{"text":"hold"}`)
	require.Equal(t, 202, status, compact(body))
	status, body = alice.send("POST", capped+"/prompt", `{"text":"one more"}`)
	expect("queue full", prompt, "POST", status, body, api.ErrQueueFull)
	status, body = alice.send("POST", capped+"/interrupt", "")
	require.Equal(t, 200, status, compact(body))

	// forbidden_host needs a server without tokens that checks Host.
	h, _ := sourceHandler(t, api.Anonymous{}, true)
	w := serve(h, "GET", "/v1/sessions", "rebound.example", "", "")
	expect("foreign host", "/v1/sessions", "GET", w.Code, decodeJSON(t, w.Body.String()), api.ErrForbiddenHost)

	for _, fail := range []struct {
		err  error
		want api.ErrorType
	}{{core.ErrFenced, api.ErrUnavailable}, {errors.New("disk on fire"), api.ErrInternal}} {
		f.trees.fail = fail.err
		status, body := alice.send("GET", p, "")
		f.trees.fail = nil
		expect(fail.err.Error(), "/v1/sessions/{id}", "GET", status, body, fail.want)
	}

	// A tree with a turn running would not boot read-only: let it end.
	f.trees.tree(id).node.Idle()
	f.trees.rebootFull(id)
	status, body = alice.send("POST", p+"/prompt", `{"text":"refused"}`)
	expect("read-only tree", prompt, "POST", status, body, api.ErrReadOnly)
	status, body = alice.send("GET", p, "")
	require.Equal(t, 200, status, compact(body))
	assert.Equal(t, true, body.(map[string]any)["read_only"])
	d.conforms(t, d.responseSchema(t, "GET", "/v1/sessions/{id}", 200), body, "read-only snapshot")

	for typ := range api.Statuses {
		assert.True(t, seen[typ], "no request of this test produced %s", typ)
	}
}
