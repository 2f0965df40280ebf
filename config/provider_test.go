package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChooseProvider(t *testing.T) {
	cases := []struct {
		name                         string
		base, key, model, defaultMdl string
		want                         Provider
		err                          string
	}{
		{name: "nothing is the offline model", want: Provider{}},
		{name: "a key alone is OpenAI", key: "sk", model: "gpt", want: Provider{BaseURL: DefaultOpenAIBaseURL, Model: "gpt"}},
		{name: "a base URL names the provider", base: "http://127.0.0.1:9/v1", model: "m", want: Provider{BaseURL: "http://127.0.0.1:9/v1", Model: "m"}},
		{name: "the session default fills the model", base: "http://127.0.0.1:9/v1", defaultMdl: "d", want: Provider{BaseURL: "http://127.0.0.1:9/v1", Model: "d"}},
		{name: "REVENANT_MODEL wins over the default", key: "sk", model: "m", defaultMdl: "d", want: Provider{BaseURL: DefaultOpenAIBaseURL, Model: "m"}},
		{name: "a provider needs a model", key: "sk", err: "REVENANT_MODEL is required"},
		{name: "a model needs a provider", model: "m", err: "no provider"},
		{name: "a default model alone is still offline", defaultMdl: "d", want: Provider{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ChooseProvider(c.base, c.key, c.model, c.defaultMdl)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.want.BaseURL == "", got.Offline())
		})
	}
}

func TestChooseProviderNeverQuotesTheKey(t *testing.T) {
	_, err := ChooseProvider("", "sk-secret-value", "", "")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "sk-secret-value")
}
