package config

import "fmt"

// DefaultOpenAIBaseURL is the provider when OPENAI_API_KEY is set without
// OPENAI_BASE_URL.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// Provider is the model provider the environment names: an
// OpenAI-compatible API at BaseURL asked for Model, or, when BaseURL is
// empty, the offline model.
type Provider struct {
	BaseURL string
	Model   string
}

// Offline reports whether p is the offline model.
func (p Provider) Offline() bool { return p.BaseURL == "" }

// ChooseProvider is the one rule every host applies to OPENAI_BASE_URL,
// OPENAI_API_KEY and REVENANT_MODEL (README, Configuration), so that the
// same variables mean the same on the local server and on Cloudflare:
//
//   - OPENAI_BASE_URL names the provider; OPENAI_API_KEY alone means
//     OpenAI (DefaultOpenAIBaseURL);
//   - a provider needs a model: REVENANT_MODEL, else defaultModel (the
//     session defaults' model, where the host has one);
//   - REVENANT_MODEL without a provider is an error, not the offline
//     model: a deployment that meant a provider must not quietly answer
//     with the offline one;
//   - none of the three is the offline model.
func ChooseProvider(baseURL, apiKey, model, defaultModel string) (Provider, error) {
	if baseURL == "" && apiKey != "" {
		baseURL = DefaultOpenAIBaseURL
	}
	switch {
	case baseURL != "":
		if model == "" {
			model = defaultModel
		}
		if model == "" {
			return Provider{}, fmt.Errorf("REVENANT_MODEL is required with a provider (%s)", baseURL)
		}
		return Provider{BaseURL: baseURL, Model: model}, nil
	case model != "":
		return Provider{}, fmt.Errorf("REVENANT_MODEL is set but no provider: set OPENAI_BASE_URL (or OPENAI_API_KEY for OpenAI)")
	default:
		return Provider{}, nil
	}
}
