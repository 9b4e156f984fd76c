import { type Browser, chromium } from 'playwright-core';

/** Debian's Chromium (.ci/run installs it); playwright-core drives it, it never downloads a browser. */
const CHROMIUM = '/usr/bin/chromium';

/**
 * Headless, as root, and local: without the background-networking flags Chromium keeps trying hosts
 * this machine's closed network refuses, and it must never look anything up beyond loopback.
 */
const LOCAL_HEADLESS_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A fresh Chromium for one test file; `ignoreCertificateErrors` for a listener's self-signed test certificate. */
export function launchChromium(options: { ignoreCertificateErrors?: boolean } = {}): Promise<Browser> {
  const args = options.ignoreCertificateErrors
    ? [...LOCAL_HEADLESS_ARGS, '--ignore-certificate-errors']
    : LOCAL_HEADLESS_ARGS;
  return chromium.launch({ executablePath: CHROMIUM, args });
}
