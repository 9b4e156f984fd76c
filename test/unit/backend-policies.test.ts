import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Ingress, V1IngressClass, V1Service } from '@kubernetes/client-node';
import { checkSigninTemplate, hasRedirectParameter, signinLocation } from '../../src/auth/signin-url.ts';
import { signinUrlProblem } from '../../src/policy/signin-url.ts';
import { compileBackendPolicies } from '../../src/routing/backend-policies.ts';
import { readAnnotations } from '../../src/sources/kubernetes/ingress/annotations.ts';
import { translateIngresses } from '../../src/sources/kubernetes/ingress/translate.ts';
import { canaryGroup } from '../../src/upstream/canary.ts';
import { weightedCandidates, weightedState } from '../../src/upstream/weighted.ts';
import { ingress, ingressClass, service } from '../helpers/fake-kube-api.ts';
import { fakeRoute, fakeServer } from '../helpers/fake-routes.ts';

const request = {
  secure: true,
  host: 'app.example.com',
  rawHost: 'App.Example.com:8443',
  requestUri: '/a?b=1',
};

describe('signin_url variables (auth/signin-url)', () => {
  it('names an unknown variable and a lone $', () => {
    assert.deepEqual(checkSigninTemplate('https://$host/x?rd=$escaped_request_uri'), {
      ok: true,
      variables: ['host', 'escaped_request_uri'],
    });
    const unknown = checkSigninTemplate('https://x/?a=$arg_next');
    assert.ok(!unknown.ok && unknown.message.includes('$arg_next'));
    assert.ok(!checkSigninTemplate('https://x/?a=$').ok);
    assert.equal(signinUrlProblem('https://$host/start'), null);
    assert.match(signinUrlProblem('ftp://$host/') ?? '', /http/);
    assert.match(signinUrlProblem('https://$host/#top') ?? '', /fragment/);
  });

  it("expands oauth2-proxy's form without a second rd; appends rd to a URL that has none", () => {
    assert.equal(
      signinLocation('https://$host/oauth2/start?rd=$escaped_request_uri', request),
      'https://app.example.com/oauth2/start?rd=%2Fa%3Fb%3D1',
    );
    assert.equal(
      signinLocation('https://login.test/start', request),
      `https://login.test/start?rd=${encodeURIComponent('https://App.Example.com:8443/a?b=1')}`,
    );
    assert.equal(hasRedirectParameter('https://x/?ard=1'), false);
    assert.equal(hasRedirectParameter('https://x/?a=1&rd=2'), true);
  });

  it('escapes what a client controls: no line break, quote, space or fragment survives', () => {
    const hostile = {
      ...request,
      secure: false,
      host: '::1',
      requestUri: '/p?q="x"\r\nSet-Cookie: a=b#frag é',
    };
    const location = signinLocation('$scheme://$host/in?next=$request_uri&rd=1', hostile);
    assert.equal(location, 'http://[::1]/in?next=/p?q=%22x%22%0D%0ASet-Cookie:%20a=b%23frag%20%C3%A9&rd=1');
    assert.doesNotMatch(location, /[\r\n" #]/);
  });
});

describe('weighted round robin (upstream/weighted)', () => {
  const [a, b, c] = [fakeServer('a:1'), fakeServer('b:1'), fakeServer('c:1')] as const;
  const weighted = (weights: number[]) =>
    fakeRoute({
      id: 'w/',
      servers: [a, b, c],
      ...compileBackendPolicies(
        { servers: weights.map((weight, i) => ({ raw: `${i}`, host: 'h', port: 1, weight })) } as never,
        weights.map((weight, i) => ({ raw: `${i}`, host: 'h', port: 1, weight })),
        null,
      ),
    });

  it("is nginx's smooth sequence: weights 5, 1, 1 give a a b a c a a", () => {
    const route = weighted([5, 1, 1]);
    const state = weightedState(route);
    const picks = Array.from(
      { length: 7 },
      () => weightedCandidates(route, state, 'all', () => true)?.[0]?.address,
    );
    assert.deepEqual(picks, ['a:1', 'a:1', 'b:1', 'a:1', 'c:1', 'a:1', 'a:1']);
  });

  it('a weight-0 server is neither picked nor a failover candidate while a weighted one is in rotation', () => {
    const route = weighted([1, 0, 1]);
    const state = weightedState(route);
    for (let i = 0; i < 6; i++) {
      const candidates = weightedCandidates(route, state, 'all', (server) => server !== c) ?? [];
      assert.deepEqual(
        candidates.map((s) => s.address),
        ['a:1'],
      );
    }
    // Every weighted server out of rotation: the weight-0 one takes the requests rather than a 503.
    const drained = weightedCandidates(route, state, 'all', (server) => server === b);
    assert.deepEqual(
      drained?.map((s) => s.address),
      ['b:1'],
    );
  });
});

describe('canary groups (upstream/canary)', () => {
  const canary = { firstServer: 1, header: 'x-canary', headerValue: null, cookie: 'use_canary' };
  it('header, then cookie, then the weight; other values fall through', () => {
    assert.equal(canaryGroup(canary, { 'x-canary': 'always', cookie: 'use_canary=never' }), 'canary');
    assert.equal(canaryGroup(canary, { 'x-canary': 'never', cookie: 'use_canary=always' }), 'main');
    assert.equal(canaryGroup(canary, { 'x-canary': 'maybe', cookie: 'a=1; use_canary=always' }), 'canary');
    assert.equal(canaryGroup(canary, { cookie: 'use_canary=sometimes' }), 'all');
    const byValue = { ...canary, headerValue: 'eu' };
    assert.equal(canaryGroup(byValue, { 'x-canary': 'eu' }), 'canary');
    assert.equal(canaryGroup(byValue, { 'x-canary': 'always' }), 'all');
  });
});

describe('backend annotations (Ingress)', () => {
  it('bad values are problems naming the annotation', () => {
    const { problems } = readAnnotations({
      'nginx.ingress.kubernetes.io/backend-protocol': 'FCGI',
      'nginx.ingress.kubernetes.io/proxy-read-timeout': '10m',
      'nginx.ingress.kubernetes.io/canary-weight': '-1',
      'nginx.ingress.kubernetes.io/permanent-redirect-code': '200',
    });
    assert.deepEqual(
      problems.map((p) => p.split(':')[0]),
      [
        'nginx.ingress.kubernetes.io/backend-protocol',
        'nginx.ingress.kubernetes.io/canary-weight',
        'nginx.ingress.kubernetes.io/permanent-redirect-code',
        'nginx.ingress.kubernetes.io/proxy-read-timeout',
      ],
    );
  });

  it('a canary splits the main path instead of conflicting with it', () => {
    const json = <T>(model: { toJSON(): unknown }) => structuredClone(model.toJSON()) as T;
    const services = ['web', 'web-next'].map((name) =>
      json<V1Service>(service({ name, namespace: 'apps', ports: [{ name: 'http', port: 80 }] })),
    );
    const main = json<V1Ingress>(
      ingress({
        name: 'main',
        namespace: 'apps',
        rules: [{ host: 'a.test', paths: [{ service: 'web', port: 80 }] }],
      }),
    );
    const canary = json<V1Ingress>(
      ingress({
        name: 'next',
        namespace: 'apps',
        annotations: {
          'nginx.ingress.kubernetes.io/canary': 'true',
          'nginx.ingress.kubernetes.io/canary-weight': '10',
          'nginx.ingress.kubernetes.io/rewrite-target': '/x',
        },
        rules: [{ host: 'a.test', paths: [{ service: 'web-next', port: 80 }] }],
      }),
    );
    // The canary listed first: the merge is a separate step, so the order does not matter.
    const result = translateIngresses({
      className: 'tollgate',
      classes: [json<V1IngressClass>(ingressClass())],
      ingresses: [canary, main],
      services: new Map(services.map((s) => [`apps/${s.metadata?.name}`, s])),
      secrets: new Map(),
      base: { hosts: [] },
    });
    const path = result.hosts[0]?.paths[0];
    assert.deepEqual(path?.service, { name: 'web', namespace: 'apps', port: 'http' });
    assert.deepEqual(path?.canary?.service, { name: 'web-next', namespace: 'apps', port: 'http' });
    assert.equal(path?.canary?.weight, 10);
    assert.equal(path?.canary?.weightTotal, 100);
    assert.deepEqual(result.reports.get('apps/next')?.problems, []);
    assert.match(result.reports.get('apps/next')?.warnings.join() ?? '', /rewrite-target ignored/);
  });
});
