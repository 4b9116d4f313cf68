package net.javacrumbs.futureconverter.java8guava;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.MoreExecutors;
import java.util.concurrent.CompletableFuture;

/**
 * Stand-in for future-converter-java8-guava (not in Debian), our own code: the one method the
 * RocketMQ 5.x client calls. The CompletableFuture completes as the ListenableFuture does, and
 * cancelling it cancels the ListenableFuture.
 */
public final class FutureConverter {
    private FutureConverter() {
    }

    public static <T> CompletableFuture<T> toCompletableFuture(ListenableFuture<T> listenable) {
        CompletableFuture<T> future = new CompletableFuture<T>() {
            @Override
            public boolean cancel(boolean mayInterruptIfRunning) {
                listenable.cancel(mayInterruptIfRunning);
                return super.cancel(mayInterruptIfRunning);
            }
        };
        Futures.addCallback(listenable, new FutureCallback<T>() {
            @Override
            public void onSuccess(T result) {
                future.complete(result);
            }

            @Override
            public void onFailure(Throwable t) {
                future.completeExceptionally(t);
            }
        }, MoreExecutors.directExecutor());
        return future;
    }
}
