import type { Metadata } from "next";
import { Suspense } from "react";
import { AccountForm } from "@/components/auth/account-form";

export const metadata: Metadata = { title: "Sign up" };

export default function SignUpPage() {
  return (
    <Suspense>
      <AccountForm kind="sign-up" />
    </Suspense>
  );
}
