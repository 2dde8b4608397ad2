/** A browser's cookies for tests driving an OAuth flow with fetch: by name and path, host ignored. */
export class CookieJar {
  private readonly cookies = new Map<string, { name: string; value: string; path: string }>();

  /** Fetches with the matching cookies and keeps what the response sets; never follows redirects. */
  async fetch(url: string | URL, init: RequestInit = {}): Promise<Response> {
    const target = new URL(url);
    const headers = new Headers(init.headers);
    const cookie = this.header(target.pathname);
    if (cookie) headers.set('cookie', cookie);
    const response = await fetch(target, { ...init, headers, redirect: 'manual' });
    for (const line of response.headers.getSetCookie()) this.store(line, target.pathname);
    return response;
  }

  /** The value of a cookie, whatever its path. */
  get(name: string): string | undefined {
    return [...this.cookies.values()].find((cookie) => cookie.name === name)?.value;
  }

  names(): string[] {
    return [...this.cookies.values()].map((cookie) => cookie.name);
  }

  private header(path: string): string {
    return [...this.cookies.values()]
      .filter((cookie) => path === cookie.path || path.startsWith(cookie.path.endsWith('/') ? cookie.path : `${cookie.path}/`))
      .map((cookie) => `${cookie.name}=${cookie.value}`)
      .join('; ');
  }

  private store(line: string, requestPath: string): void {
    const [pair = '', ...attributes] = line.split(';').map((part) => part.trim());
    const separator = pair.indexOf('=');
    const name = pair.slice(0, separator);
    const value = pair.slice(separator + 1);
    let path = requestPath.slice(0, requestPath.lastIndexOf('/')) || '/';
    let expired = value === '';
    for (const attribute of attributes) {
      const [key = '', argument = ''] = attribute.split('=');
      if (key.toLowerCase() === 'path') path = argument;
      if (key.toLowerCase() === 'max-age' && Number(argument) <= 0) expired = true;
      if (key.toLowerCase() === 'expires' && Date.parse(argument) <= Date.now()) expired = true;
    }
    const id = `${name};${path}`;
    if (expired) this.cookies.delete(id);
    else this.cookies.set(id, { name, value, path });
  }
}
