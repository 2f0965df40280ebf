// Package redirecthost is a test server for redirect tests: an HTTP server
// on one loopback address that records every path it is asked for (its
// ledger) and redirects the paths it is told to. The tests of
// http_request's redirect rules use one per address, in process, in the
// guest host and through the server binary.
package redirecthost
