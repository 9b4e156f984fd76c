/** Chart values with OpenID Connect, shared by helm-oidc.test.ts and rendered-config.test.ts. */

/** Two providers: one with every optional key, one with a Secret key of its own. */
export const OIDC_VALUES = {
  masterkey: { existingSecret: 'edge-masterkey' },
  oidc: {
    sessionSecret: { existingSecret: 'edge-oidc-session', existingSecretKey: 'secrets' },
    providers: {
      corp: {
        issuer: 'https://login.example.com/realms/corp',
        clientId: 'tollgate',
        clientSecret: { existingSecret: 'edge-oidc-corp' },
        scopes: ['openid', 'email', 'profile', 'offline_access'],
        groupsClaim: 'roles',
        subjectClaim: 'email',
        passAccessToken: true,
        redirectUrl: 'https://auth.example.com/.tollgate/oidc/callback',
      },
      'google.workspace': {
        issuer: 'https://accounts.google.com',
        clientId: 'g-client',
        clientSecret: { existingSecret: 'edge-oidc-google', key: 'secret' },
      },
    },
  },
  config: { sessionMaxAgeSeconds: 3600 },
};
