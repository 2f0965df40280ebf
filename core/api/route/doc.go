// Package route matches a request's method and path against a fixed table
// of patterns, the way net/http's ServeMux matches the patterns the API
// uses, without importing net/http (core/httpmsg explains why).
//
// A pattern is a method, a space and a path of segments: a literal
// ("sessions") or a wildcard ("{id}"). Its rules, each ServeMux's:
//   - A request matches a route of its method; a HEAD also matches a GET
//     route when no HEAD route matches.
//   - The path is matched as it was sent (URL.EscapedPath), segment by
//     segment, each segment unescaped before it is compared: "%2F" in a
//     segment is part of that segment, so {id} of "/v1/sessions/a%2Fb" is
//     "a/b", and "prom%70t" matches the literal "prompt". A segment that
//     does not unescape is taken as sent.
//   - A wildcard matches exactly one non-empty segment, and its value is
//     the unescaped segment. No pattern ends in "/", and no wildcard
//     matches a trailing slash, nor a segment that is only "%2F" (ServeMux
//     takes that for a trailing slash).
//   - Where two routes of a method match, the one with a literal at the
//     first segment where they differ wins. Two patterns that can match
//     the same path with neither more specific (/a/{x} and /{y}/b) are
//     refused when registered, as ServeMux refuses them.
//
// Unlike ServeMux it never redirects: a path that is not clean ("//",
// "/./", "/../") matches no route. The API answers such paths 404 before
// routing (api.Directory.Admit).
//
// It imports core/httpmsg and the standard library only.
package route
