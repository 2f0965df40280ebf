package config

// DurationSyntax exports durationSyntax to the external tests.
var DurationSyntax = durationSyntax
