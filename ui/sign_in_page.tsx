/**
 * The sign-in page: a token form, and nothing of the fleet. Shown in place
 * of any page asked for without a valid session, so signing in returns to it.
 *
 * @module
 */
import { Layout } from "./layout.tsx";

/** The sign-in page; `notice` says why it is shown again, `next` where to go after. */
export function SignInPage(props: { next: string; notice?: string }) {
  return (
    <Layout title="Sign in" page="sign-in" session={null}>
      <div class="signin panel">
        <h1>Sign in to llmgw</h1>
        {props.notice === undefined ? null : <div class="notice">{props.notice}</div>}
        <p class="mute">
          Paste an admin token (<code>llmgw tokens create admin</code>, or <code>LLMGW_TOKEN</code>
          {" "}
          in <code>dev.env</code>). It is kept in an HttpOnly cookie for this site only.
        </p>
        <form method="post" action="/ui/sign-in">
          <input type="hidden" name="next" value={props.next} />
          <label for="token">Token</label>
          <input
            id="token"
            name="token"
            type="password"
            autocomplete="off"
            required
            autofocus
            spellcheck={false}
          />
          <button type="submit" class="primary">Sign in</button>
        </form>
      </div>
    </Layout>
  );
}

/** The page a valid token of another kind gets: refused, saying which kind is needed. */
export function RefusedPage(props: { message: string; csrf: string | null }) {
  return (
    <Layout title="Refused" page="sign-in" session={null}>
      <div class="signin panel">
        <h1>This token may not use the dashboard</h1>
        <div class="notice">{props.message}</div>
        <p class="mute">
          The dashboard shows what the admin API shows and acts as it does, so it takes admin tokens
          only.
        </p>
        <form method="post" action="/ui/sign-out">
          {props.csrf === null ? null : <input type="hidden" name="_csrf" value={props.csrf} />}
          <button type="submit">Sign in with another token</button>
        </form>
      </div>
    </Layout>
  );
}
