"""auger as an Agent Client Protocol agent (`auger acp`); the SDK is imported only by this command."""
