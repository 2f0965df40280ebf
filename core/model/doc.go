// Package model is the contract between the turn runner and a language
// model: a request (system prompt, transcript, tool specs) and a stream of
// chunks (text deltas, tool-call deltas, usage, finish reason).
//
// Implementations: the OpenAI-compatible provider and the offline model
// (model/offline), whose output is a pure function of the request. The
// package imports nothing of ours, so hosts and tests can implement it
// freely.
package model
