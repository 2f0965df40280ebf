// Package config reads the REVENANT_CONFIG file: webhook tools, permission
// rules (an operator's ask may be final), the egress policy, the models a
// session may name, defaults for new sessions (DESIGN §11) and the trees'
// settings (core/settings). The
// format is documented by a complete example, docs/config.example.json,
// which a test keeps valid.
//
// Parsing is strict and happens once, at start: an unknown key anywhere, a
// key given twice, a value of the wrong type or out of range is an error
// that names the key by its path (`webhook_tools[1].secrett: unknown key`,
// `egress.ports[0]: must be 1–65535`), and every problem in the file is
// reported at once. Error messages never quote a secret.
//
// Secrets are web.Secret values: they print as "[redacted]" however a
// Config is formatted or marshalled, so a Config may be logged.
//
// The package imports tools/web (to build webhook tools and the egress
// policy), core/tool, core/settings and core/permission (whose rule types
// and pattern syntax `permissions` uses), and nothing else of revenant.
package config
