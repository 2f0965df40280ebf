package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/revenantrt/revenant/core/api"
	"github.com/revenantrt/revenant/core/permission"
	"github.com/revenantrt/revenant/core/settings"
	"github.com/revenantrt/revenant/core/tool"
	"github.com/revenantrt/revenant/tools/web"
	"github.com/revenantrt/revenant/tools/web/httpargs"
)

// EnvVar names the environment variable holding the configuration file's
// path. Unset, revenant runs with the zero Config: no webhook tools, no
// rules, the default egress policy, the built-in session defaults.
const EnvVar = "REVENANT_CONFIG"

// Limits on values.
const (
	MinSecretBytes = 16
	// MinTimeout is the shortest egress or webhook timeout. It bounds a
	// request from its dial to the end of its body (DNS, TCP, TLS, the
	// server's answer), so a few nanoseconds would fail every request
	// before it is sent; a tenth of a second still lets a webhook on the
	// same machine or network answer.
	MinTimeout       = 100 * time.Millisecond
	MaxTimeout       = 10 * time.Minute
	MaxResponseBytes = 1 << 30
	// MaxFileBytes caps the configuration file: a few KiB in practice, so
	// a path to anything else (a device such as /dev/zero, a log) is
	// refused rather than read into memory to its end.
	MaxFileBytes = 4 << 20
)

// Decision is a permission decision (package core/permission's).
type Decision = permission.Decision

// Decisions.
const (
	Allow = permission.Allow
	Ask   = permission.Ask
	Deny  = permission.Deny
)

// Config is a parsed REVENANT_CONFIG file. The zero Config is what an
// empty object, {}, parses to.
type Config struct {
	// WebhookTools are the webhook tools, in file order. Permission is
	// "ask" unless set; Timeout is 0 (the egress timeout) unless set.
	WebhookTools []web.WebhookSpec
	// Permissions are the permission rules, in file order (the last match
	// wins when they are applied).
	Permissions []Rule
	// Egress is the outbound HTTP policy of http_request and the webhooks.
	Egress web.Egress
	// SessionDefaults apply to a new session where its own configuration
	// is silent.
	SessionDefaults SessionDefaults
	// AllowedModels are the provider models a session may name (its
	// config's `model`), in file order; nil allows any. Parse has checked
	// that SessionDefaults.Model, if set, is one; the host checks the
	// provider's default model (REVENANT_MODEL) with CheckDefaultModel.
	AllowedModels []string
	// Settings are the trees' knobs (resume budget, watchdogs, page
	// sizes, …), the same type every host configures; Parse has validated
	// them.
	Settings settings.Settings
}

// Rule is a permission rule: calls of Action touching a resource matching
// the Resource pattern are decided by Decision. Both are glob patterns of
// package core/permission ('*' for any run of characters); a file's rules
// are never Exact. A Final ask (`"final": true`) is one no session rule
// and no `always` reply can lift, as a deny always is.
type Rule = permission.Rule

// SessionDefaults are defaults for new sessions.
type SessionDefaults struct {
	SystemPrompt string
	Model        string
	// Tools names the tools offered by default; nil offers every tool, an
	// empty list none.
	Tools *[]string
}

// CheckDefaultModel checks the model a host asks for when a session names
// none (REVENANT_MODEL, else the session defaults' model) against
// AllowedModels: a server whose default a client could not name itself
// is misconfigured. The empty name (the offline model) always passes.
func (c Config) CheckDefaultModel(name string) error {
	if name == "" || c.AllowsModel(name) {
		return nil
	}
	return fmt.Errorf("the default model %q is not in allowed_models (%s)", name, strings.Join(c.AllowedModels, ", "))
}

// AllowsModel reports whether a session may name the model: any when
// AllowedModels is nil.
func (c Config) AllowsModel(name string) bool {
	return c.AllowedModels == nil || slices.Contains(c.AllowedModels, name)
}

// EgressPolicy is the egress policy to build http_request and the webhook
// tools with. It sends nothing until the host says how: a host with
// sockets passes it to tools/web/webnet.Dialing, a platform with its own
// fetch to Egress.WithTransport.
func (c Config) EgressPolicy() web.Egress { return c.Egress }

// Tools builds the webhook tools under policy, normally c.EgressPolicy()
// with the host's way of sending (a caller may add a resolver). Each is a *web.Webhook, which also carries
// its configured Permission.
func (c Config) Tools(policy web.Egress) ([]tool.Tool, error) {
	out := make([]tool.Tool, 0, len(c.WebhookTools))
	for i, spec := range c.WebhookTools {
		w, err := web.NewWebhook(spec, policy)
		if err != nil {
			return nil, fmt.Errorf("webhook_tools[%d]: %w", i, err)
		}
		out = append(out, w)
	}
	return out, nil
}

// Error is one problem with a configuration, naming the key by its path
// (`webhook_tools[0].url`); Key is empty for a problem with the whole file.
type Error struct {
	Key string
	Msg string
}

func (e *Error) Error() string {
	if e.Key == "" {
		return e.Msg
	}
	return e.Key + ": " + e.Msg
}

// Errors is every problem Parse found, in the order found.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

// Unwrap lets errors.As find each *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Load reads and parses the file at path.
func Load(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	// One byte past the cap tells a file at the cap from a larger one.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	if len(data) > MaxFileBytes {
		return Config{}, fmt.Errorf("config %s: larger than %d bytes; is it the configuration file?", path, MaxFileBytes)
	}
	c, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse parses a configuration. On any problem it returns Errors, listing
// them all.
func Parse(data []byte) (Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return Config{}, Errors{{Msg: "the file is empty; write {} for the defaults"}}
	}
	if msg := textMessage(data); msg != "" {
		return Config{}, Errors{{Msg: msg}}
	}
	d := &decoder{}
	c := d.config(data)
	if len(d.errs) > 0 {
		return Config{}, d.errs
	}
	return c, nil
}

// builtinTools are the names of revenant's own tools (DESIGN §12); a
// webhook tool may not take one.
var builtinTools = []string{"question", "task", "kv_get", "kv_put", web.HTTPRequestName}

const toolNameRule = "must be 1 to 64 letters, digits, '_' or '-'"

// validToolName keeps toolNameRule. It is a loop, not a regexp: this
// package is in the Worker's wasm, where a package-level regexp linked
// regexp and compiled at every Go start (a 64-fold repetition: about 860
// allocations, and on a fresh isolate about 12 ms of the first start).
func validToolName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

type decoder struct {
	errs Errors
}

func (d *decoder) fail(key, format string, args ...any) {
	d.errs = append(d.errs, &Error{Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) config(data []byte) Config {
	var c Config
	o := d.object("", data, "webhook_tools", "permissions", "egress", "session_defaults", "allowed_models", "settings")
	if o == nil {
		return c
	}
	// Webhook URLs are not checked against the egress section: each is the
	// operator's own destination, trusted by that webhook's client alone
	// (tools/web.NewWebhook), which does not widen what http_request may reach.
	if raw, key, ok := o.field("webhook_tools"); ok {
		c.WebhookTools = d.webhookTools(key, raw)
	}
	if raw, key, ok := o.field("permissions"); ok {
		c.Permissions = d.permissions(key, raw)
	}
	if raw, key, ok := o.field("egress"); ok {
		c.Egress = d.egress(key, raw)
	}
	if raw, key, ok := o.field("allowed_models"); ok {
		c.AllowedModels = d.allowedModels(key, raw)
	}
	if raw, key, ok := o.field("session_defaults"); ok {
		c.SessionDefaults = d.sessionDefaults(key, raw)
		if m := c.SessionDefaults.Model; m != "" && !c.AllowsModel(m) {
			d.fail(member(key, "model"), "%q is not in allowed_models; a client could not name the default itself", m)
		}
	}
	if raw, key, ok := o.field("settings"); ok {
		c.Settings = d.settings(key, raw)
	}
	return c
}

func (d *decoder) webhookTools(key string, raw json.RawMessage) []web.WebhookSpec {
	items, _ := d.array(key, raw)
	var specs []web.WebhookSpec
	firstKey := map[string]string{} // tool name → where it was first given
	for i, item := range items {
		k := index(key, i)
		o := d.object(k, item, "name", "description", "parameters", "url", "idempotent", "secret", "timeout", "permission")
		if o == nil {
			continue
		}
		s := web.WebhookSpec{Permission: string(Ask)}
		var u *url.URL
		if raw, k, ok := o.required(d, "name"); ok {
			if name, ok := d.str(k, raw); ok {
				switch {
				case !validToolName(name):
					d.fail(k, toolNameRule)
				case slices.Contains(builtinTools, name):
					d.fail(k, "%q is the name of a built-in tool", name)
				case firstKey[name] != "":
					d.fail(k, "duplicate tool name %q (also %s)", name, firstKey[name])
				default:
					firstKey[name] = k
				}
				s.Name = name
			}
		}
		if raw, k, ok := o.required(d, "description"); ok {
			s.Description, _ = d.nonEmpty(k, raw)
		}
		if raw, k, ok := o.field("parameters"); ok {
			s.Parameters = d.schema(k, raw)
		}
		if raw, k, ok := o.required(d, "url"); ok {
			u = d.url(k, raw)
			if u != nil {
				s.URL = u.String()
			}
		}
		if raw, k, ok := o.field("idempotent"); ok {
			s.Idempotent, _ = d.boolean(k, raw)
		}
		if raw, k, ok := o.required(d, "secret"); ok {
			if v, ok := d.str(k, raw); ok {
				checkSecret(d, k, v)
				s.Secret = web.NewSecret(v)
			}
		}
		if raw, k, ok := o.field("timeout"); ok {
			s.Timeout = d.timeout(k, raw)
		}
		if raw, k, ok := o.field("permission"); ok {
			s.Permission = string(d.decision(k, raw))
		}
		specs = append(specs, s)
	}
	return specs
}

func (d *decoder) permissions(key string, raw json.RawMessage) []Rule {
	var rules []Rule
	items, _ := d.array(key, raw)
	for i, item := range items {
		o := d.object(index(key, i), item, "action", "resource", "decision", "final")
		if o == nil {
			continue
		}
		var r Rule
		if raw, k, ok := o.required(d, "action"); ok {
			if s, ok := d.str(k, raw); ok {
				d.check(k, permission.ValidateAction(s))
				r.Action = s
			}
		}
		if raw, k, ok := o.required(d, "resource"); ok {
			if s, ok := d.str(k, raw); ok {
				d.check(k, permission.ValidateResource(s))
				r.Resource = s
			}
		}
		if raw, k, ok := o.required(d, "decision"); ok {
			r.Decision = d.decision(k, raw)
		}
		if raw, k, ok := o.field("final"); ok {
			r.Final, _ = d.boolean(k, raw)
			if r.Final && r.Decision == Allow {
				d.fail(k, `only an "ask" or "deny" rule can be final (final keeps a session's rules and always replies from lifting it)`)
			}
		}
		rules = append(rules, r)
	}
	return rules
}

func (d *decoder) egress(key string, raw json.RawMessage) web.Egress {
	p := web.NewEgress()
	o := d.object(key, raw, "schemes", "ports", "hosts", "allow_cidrs", "max_response_bytes", "timeout")
	if o == nil {
		return p
	}
	if raw, k, ok := o.field("schemes"); ok {
		var schemes []string
		seen := map[string]string{}
		for i, item := range d.nonEmptyArray(k, raw) {
			if s, ok := d.str(index(k, i), item); ok {
				if s != "https" && s != "http" {
					d.fail(index(k, i), `must be "https" or "http"`)
				} else {
					once(d, seen, index(k, i), s, strconv.Quote(s))
				}
				schemes = append(schemes, s)
			}
		}
		p = p.WithSchemes(schemes...)
	}
	if raw, k, ok := o.field("ports"); ok {
		var ports []int
		seen := map[int64]string{}
		for i, item := range d.nonEmptyArray(k, raw) {
			if n, ok := d.integer(index(k, i), item); ok {
				if n < 1 || n > 65535 {
					d.fail(index(k, i), "must be 1–65535")
				} else {
					once(d, seen, index(k, i), n, strconv.FormatInt(n, 10))
				}
				ports = append(ports, int(n))
			}
		}
		p = p.WithPorts(ports...)
	}
	if raw, k, ok := o.field("hosts"); ok {
		var hosts []string
		seen := map[string]string{}
		items := d.nonEmptyArray(k, raw) // an empty list would fail open: leave the key out for any host
		for i, item := range items {
			if h, ok := d.str(index(k, i), item); ok {
				if !validHostPattern(h) {
					d.fail(index(k, i), `must be a host name, an IP address, or "*." and a domain`)
				} else {
					// Matching ignores case and a trailing dot: so does this.
					once(d, seen, index(k, i), httpargs.NormalizeHost(h), strconv.Quote(h))
				}
				hosts = append(hosts, h)
			}
		}
		p = p.WithHosts(hosts...)
	}
	if raw, k, ok := o.field("allow_cidrs"); ok {
		var cidrs []netip.Prefix
		seen := map[netip.Prefix]string{}
		items, _ := d.array(k, raw)
		for i, item := range items {
			s, ok := d.str(index(k, i), item)
			if !ok {
				continue
			}
			prefix, err := netip.ParsePrefix(s)
			switch {
			case err != nil:
				d.fail(index(k, i), "must be a CIDR such as 10.0.0.0/8 or fd00::/8")
			case prefix != prefix.Masked():
				d.fail(index(k, i), "has bits set past the prefix length; did you mean %s?", prefix.Masked())
			default:
				once(d, seen, index(k, i), prefix, strconv.Quote(s))
				cidrs = append(cidrs, prefix)
			}
		}
		p = p.WithAllowCIDRs(cidrs...)
	}
	if raw, k, ok := o.field("max_response_bytes"); ok {
		if n, ok := d.integer(k, raw); ok {
			if n < 1 || n > MaxResponseBytes {
				d.fail(k, "must be 1–%d", MaxResponseBytes)
			}
			p = p.WithMaxResponseBytes(n)
		}
	}
	if raw, k, ok := o.field("timeout"); ok {
		p = p.WithTimeout(d.timeout(k, raw))
	}
	return p
}

// allowedModels reads the allow-list of models: a non-empty list of
// distinct, non-empty names.
func (d *decoder) allowedModels(key string, raw json.RawMessage) []string {
	models := []string{}
	seen := map[string]string{}
	for i, item := range d.nonEmptyArray(key, raw) {
		k := index(key, i)
		if name, ok := d.nonEmpty(k, item); ok && once(d, seen, k, name, strconv.Quote(name)) {
			models = append(models, name)
		}
	}
	return models
}

// once reports whether v is given for the first time in a list, recording
// key as where; a repeat is refused naming both places, shown as written.
// A repeated entry changes nothing a list allows, but it is a sign of a
// slip (one entry edited where another was meant) worth a look.
func once[V comparable](d *decoder, seen map[V]string, key string, v V, shown string) bool {
	if first, ok := seen[v]; ok {
		d.fail(key, "%s is given twice (also %s)", shown, first)
		return false
	}
	seen[v] = key
	return true
}

func (d *decoder) sessionDefaults(key string, raw json.RawMessage) SessionDefaults {
	var s SessionDefaults
	o := d.object(key, raw, "system_prompt", "model", "tools")
	if o == nil {
		return s
	}
	if raw, k, ok := o.field("system_prompt"); ok {
		s.SystemPrompt, _ = d.str(k, raw)
	}
	if raw, k, ok := o.field("model"); ok {
		s.Model, _ = d.str(k, raw)
	}
	if raw, k, ok := o.field("tools"); ok {
		if items, ok := d.array(k, raw); ok {
			tools := []string{}
			seen := map[string]string{}
			for i, item := range items {
				if name, ok := d.str(index(k, i), item); ok {
					if !validToolName(name) {
						d.fail(index(k, i), toolNameRule)
					} else {
						once(d, seen, index(k, i), name, strconv.Quote(name))
					}
					tools = append(tools, name)
				}
			}
			s.Tools = &tools
		}
	}
	return s
}

// object is a JSON object's members.
type object struct {
	key  string
	vals map[string]json.RawMessage
}

// object decodes raw as an object whose keys must be among known, reporting
// unknown and repeated keys; nil if raw is not an object.
func (d *decoder) object(key string, raw json.RawMessage, known ...string) *object {
	if kind(raw) != '{' {
		if key == "" {
			d.fail(key, "the file must hold a JSON object")
		} else {
			d.fail(key, "must be an object")
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // the opening brace
		d.fail(key, "must be an object")
		return nil
	}
	o := &object{key: key, vals: map[string]json.RawMessage{}}
	// An unknown key written twice is one problem: the operator removes
	// or renames it once.
	unknown := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		name, isString := tok.(string)
		var val json.RawMessage
		if err == nil && isString {
			err = dec.Decode(&val)
		}
		if err != nil || !isString {
			d.fail(key, "malformed object")
			return nil
		}
		k := member(key, name)
		switch {
		case unknown[name]:
		case !slices.Contains(known, name):
			unknown[name] = true
			d.fail(k, "unknown key%s", suggest(name, known))
		case o.vals[name] != nil:
			d.fail(k, "given twice")
		default:
			o.vals[name] = val
		}
	}
	return o
}

// field returns a member's value and key path if it is present.
func (o *object) field(name string) (json.RawMessage, string, bool) {
	raw, ok := o.vals[name]
	return raw, member(o.key, name), ok
}

// required is field, reporting a missing member.
func (o *object) required(d *decoder, name string) (json.RawMessage, string, bool) {
	raw, k, ok := o.field(name)
	if !ok {
		d.fail(k, "required")
	}
	return raw, k, ok
}

// check reports err, if any, as the problem with key.
func (d *decoder) check(key string, err error) {
	if err != nil {
		d.fail(key, "%s", err.Error())
	}
}

func (d *decoder) str(key string, raw json.RawMessage) (string, bool) {
	var s string
	if kind(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		d.fail(key, "must be a string")
		return "", false
	}
	return s, true
}

func (d *decoder) nonEmpty(key string, raw json.RawMessage) (string, bool) {
	s, ok := d.str(key, raw)
	if ok && strings.TrimSpace(s) == "" {
		d.fail(key, "must not be empty")
		return s, false
	}
	return s, ok
}

func (d *decoder) boolean(key string, raw json.RawMessage) (bool, bool) {
	var b bool
	if k := kind(raw); (k != 't' && k != 'f') || json.Unmarshal(raw, &b) != nil {
		d.fail(key, "must be true or false")
		return false, false
	}
	return b, true
}

func (d *decoder) integer(key string, raw json.RawMessage) (int64, bool) {
	text := string(bytes.TrimSpace(raw))
	n, err := strconv.ParseInt(text, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange): // an integer still, only too long a one
		d.fail(key, "%s is out of range", text)
		return 0, false
	case err != nil:
		d.fail(key, "must be an integer")
		return 0, false
	}
	return n, true
}

func (d *decoder) array(key string, raw json.RawMessage) ([]json.RawMessage, bool) {
	var items []json.RawMessage
	if kind(raw) != '[' || json.Unmarshal(raw, &items) != nil {
		d.fail(key, "must be an array")
		return nil, false
	}
	return items, true
}

func (d *decoder) nonEmptyArray(key string, raw json.RawMessage) []json.RawMessage {
	items, ok := d.array(key, raw)
	if ok && len(items) == 0 {
		d.fail(key, "must not be empty; leave the key out for the default")
	}
	return items
}

// timeout reads a request timeout: a Go duration string from MinTimeout
// to MaxTimeout.
func (d *decoder) timeout(key string, raw json.RawMessage) time.Duration {
	v, ok := d.duration(key, raw)
	switch {
	case !ok:
	case v > 0 && v < MinTimeout:
		d.fail(key, "%s is shorter than the least allowed, %s (a request fails once it has taken that long, from its dial to the end of its body)", v, MinTimeout)
	case v <= 0 || v > MaxTimeout:
		d.fail(key, "must be at least %s and at most %s", MinTimeout, MaxTimeout)
	}
	return v
}

// positiveDuration reads a Go duration string that is more than zero.
func (d *decoder) positiveDuration(key string, raw json.RawMessage) time.Duration {
	v, ok := d.duration(key, raw)
	if ok && v <= 0 {
		d.fail(key, "must be more than 0; leave the key out for the default")
	}
	return v
}

// duration reads a Go duration string; ok is false once it has failed.
func (d *decoder) duration(key string, raw json.RawMessage) (v time.Duration, ok bool) {
	s, ok := d.str(key, raw)
	if !ok {
		return 0, false
	}
	v, err := time.ParseDuration(s)
	if err != nil && durationSyntax(s) {
		// time.ParseDuration says "invalid duration" for a well-formed one
		// too long for an int64 of nanoseconds: name the real problem.
		d.fail(key, "%s is out of range: a duration is at most %s", s, time.Duration(math.MaxInt64))
		return 0, false
	}
	if err != nil {
		d.fail(key, `must be a duration such as "30s" or "2m"`)
		return 0, false
	}
	return v, true
}

// durationSyntax reports whether s is written as time.ParseDuration
// expects (an optional sign, then numbers each followed by a unit, or "0"),
// whatever its size.
func durationSyntax(s string) bool {
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	if s == "0" {
		return true
	}
	if s == "" {
		return false
	}
	isDigit := func(c byte) bool { return '0' <= c && c <= '9' }
	for s != "" {
		i, digits := 0, 0
		for i < len(s) && isDigit(s[i]) {
			i, digits = i+1, digits+1
		}
		if i < len(s) && s[i] == '.' {
			i++
			for i < len(s) && isDigit(s[i]) {
				i, digits = i+1, digits+1
			}
		}
		if digits == 0 {
			return false
		}
		s = s[i:]
		j := 0
		for j < len(s) && s[j] != '.' && !isDigit(s[j]) {
			j++
		}
		switch s[:j] {
		case "ns", "us", "\u00b5s", "\u03bcs", "ms", "s", "m", "h":
		default:
			return false
		}
		s = s[j:]
	}
	return true
}

func (d *decoder) decision(key string, raw json.RawMessage) Decision {
	s, ok := d.str(key, raw)
	if !ok {
		return ""
	}
	switch v := Decision(s); v {
	case Allow, Ask, Deny:
		return v
	}
	d.fail(key, `must be "allow", "ask" or "deny"`)
	return Decision(s)
}

// schema reads a tool's parameters: a JSON schema object, compacted.
func (d *decoder) schema(key string, raw json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if kind(raw) != '{' || json.Unmarshal(raw, &top) != nil {
		d.fail(key, "must be a JSON schema object")
		return nil
	}
	if t, ok := top["type"]; ok && string(bytes.TrimSpace(t)) != `"object"` {
		d.fail(key, `must describe an object ("type": "object")`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		d.fail(key, "must be a JSON schema object")
		return nil
	}
	return buf.Bytes()
}

func (d *decoder) url(key string, raw json.RawMessage) *url.URL {
	s, ok := d.str(key, raw)
	if !ok {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" {
		d.fail(key, "must be an absolute https or http URL")
		return nil
	}
	if u.User != nil {
		d.fail(key, "must not contain credentials; the webhook is authenticated by its secret")
		return nil
	}
	if !asciiHost(u.Hostname()) {
		// Every transport dials an internationalized name in its xn--
		// form, which the egress guard would then not know as the
		// webhook's trusted destination: every call would be refused.
		d.fail(key, "must name its host in ASCII (an internationalized name in its xn-- form)")
		return nil
	}
	return u
}

// asciiHost reports whether host (a URL's Hostname: an IPv6 literal
// without its brackets) is an IP literal or a name of ASCII letters,
// digits, '-', '_' and '.' only.
func asciiHost(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	for _, r := range host {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

// checkSecret checks a webhook secret as web.SigningKey reads it: a
// "whsec_" secret must be base64 of at least MinSecretBytes key bytes, any
// other at least MinSecretBytes bytes itself. No message quotes it.
func checkSecret(d *decoder, key, secret string) {
	signingKey, err := web.SigningKey(secret)
	standard := strings.HasPrefix(secret, "whsec_")
	switch {
	case err != nil || (standard && len(signingKey) < MinSecretBytes):
		d.fail(key, `must be standard base64 of at least %d bytes after "whsec_"`, MinSecretBytes)
	case len(signingKey) < MinSecretBytes:
		d.fail(key, "must be at least %d bytes", MinSecretBytes)
	}
}

// validHostPattern accepts a host name, an IP literal, or "*." and a name.
func validHostPattern(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	name := strings.TrimSuffix(strings.TrimPrefix(h, "*."), ".")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// kind is the first byte of a JSON value: '{', '[', '"', 't', 'f', 'n' or
// a digit or '-'.
func kind(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func member(key, name string) string {
	if key == "" {
		return name
	}
	return key + "." + name
}

func index(key string, i int) string { return fmt.Sprintf("%s[%d]", key, i) }

// suggest proposes a known key close to an unknown one.
func suggest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(strings.ToLower(name), k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// CheckSyntax reports, by line and column as Parse does, where data is
// not one JSON value (or not text it reads as written: textMessage). A
// caller that wraps a value before it parses it (the Worker's
// REVENANT_SETTINGS is read as a file's "settings") checks it first, so
// that the place is counted in the text its user wrote.
func CheckSyntax(data []byte) error {
	if msg := textMessage(data); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// textMessage says, by line and column, why data is not a JSON value that
// decodes to exactly the text written, or "" when it is: a byte that is
// not UTF-8 (utf8Message), a syntax error (syntaxMessage), or an escape of
// half a surrogate pair (surrogateMessage).
func textMessage(data []byte) string {
	if msg := utf8Message(data); msg != "" {
		return msg
	}
	var v json.RawMessage
	if err := json.Unmarshal(data, &v); err != nil {
		return syntaxMessage(data, err)
	}
	return surrogateMessage(data)
}

// lineColumn is where the last character of before is: its line and its
// column, both from 1. Columns count characters (runes), as an editor
// shows them, not bytes; a byte that is not UTF-8 counts as one.
func lineColumn(before []byte) (line, col int) {
	line = bytes.Count(before, []byte("\n")) + 1
	col = utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	return line, col
}

// utf8Message says where data's first byte that is not UTF-8 is, by line
// and column, or "" when it is all UTF-8.
// encoding/json would read such a byte as U+FFFD without a word: a
// webhook's secret would sign with other bytes than the file's, a system
// prompt would not be the one written.
func utf8Message(data []byte) string {
	if utf8.Valid(data) {
		return ""
	}
	i := 0
	for i < len(data) {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		i += size
	}
	line, col := lineColumn(data[:i+1])
	return fmt.Sprintf("invalid UTF-8 at line %d, column %d: the file must be UTF-8 text", line, col)
}

// syntaxMessage says where a JSON syntax error is, by line and column.
func syntaxMessage(data []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
	}
	// Offset counts the offending byte. With none (the text stops inside
	// a value) point at its last character, not at a column 0 after a
	// final newline.
	before := data[:min(int(se.Offset), len(data))]
	truncated := int(se.Offset) >= len(data) && strings.Contains(se.Error(), "unexpected end")
	if truncated {
		before = bytes.TrimRight(before, " \t\r\n")
	}
	line, col := lineColumn(before)
	if truncated {
		return fmt.Sprintf("invalid JSON: the text ends early, after line %d, column %d (truncated?): %s", line, col, se.Error())
	}
	return fmt.Sprintf("invalid JSON at line %d, column %d: %s", line, col, se.Error())
}

// surrogateMessage says where the first \u escape of half a UTF-16
// surrogate pair is in data, a valid JSON text, by line and column of its
// backslash (api.HalfSurrogateAt finds it), or "" when there is none.
// encoding/json reads it as U+FFFD without a word, the harm utf8Message
// prevents for raw bytes.
func surrogateMessage(data []byte) string {
	i := api.HalfSurrogateAt(data)
	if i < 0 {
		return ""
	}
	line, col := lineColumn(data[:i+1])
	return fmt.Sprintf("invalid escape at line %d, column %d: %s is half a UTF-16 surrogate pair (JSON decoding would silently read it as U+FFFD)", line, col, data[i:i+6])
}
